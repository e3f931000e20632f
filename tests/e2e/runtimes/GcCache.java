// A cache of 1.5M live entries, each request replacing 300k of them with fresh objects: G1 keeps
// refining and scanning a large old generation that points into the young one.
import java.util.HashMap;

public class GcCache {
    public static void main(String[] args) {
        int requests = args.length > 0 ? Integer.parseInt(args[0]) : 40;
        HashMap<Integer, long[]> cache = new HashMap<>();
        for (int i = 0; i < 1_500_000; i++) cache.put(i, new long[4]);
        long total = 0;
        for (int r = 0; r < requests; r++) {
            for (int i = 0; i < 300_000; i++) {
                int k = (r * 300_000 + i) % 1_500_000;
                cache.put(k, new long[]{k, r, i, total});
            }
            total += cache.get(r)[0];
        }
        System.out.println(total);
    }
}
