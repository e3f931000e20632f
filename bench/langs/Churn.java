// STEPS requests of fixed work: an 8 MiB array per request, touched page by page and dropped.
public class Churn {
  static long handle(int n) {
    byte[] b = new byte[8 << 20];
    for (int i = 0; i < b.length; i += 4096) b[i] = (byte) n;
    return b[n];
  }

  public static void main(String[] args) {
    long steps = Long.parseLong(args.length > 0 ? args[0] : "100");
    long total = 0;
    for (int n = 0; n < steps; n++) total += handle(n & 1023);
    System.out.println(total);
  }
}
