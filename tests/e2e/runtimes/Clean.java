// A Java loop that computes and allocates little: nothing material to find (the JVM's own start-up
// and heap are not the program's mechanism).
public class Clean {
    public static void main(String[] args) {
        long s = 0;
        for (long i = 0; i < 1_500_000_000L; i++) s += i % 7;
        System.out.println(s);
    }
}
