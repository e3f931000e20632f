// A request handler on the JVM that allocates an 8 MiB array per request and touches each page:
// the page faults come from the JVM zeroing and the handler filling each new array.
public class Buffers {
  static long handle(int n) {
    byte[] b = new byte[8 << 20];
    for (int i = 0; i < b.length; i += 4096) b[i] = (byte) n;
    return b[n];
  }

  public static void main(String[] args) {
    long total = 0;
    for (int n = 0; n < 400; n++) total += handle(n & 1023);
    System.out.println(total);
  }
}
