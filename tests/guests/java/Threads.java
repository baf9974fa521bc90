// A JVM at forkvm's default memory: heap sized from the machine's RAM (the
// memory limit), GC under allocation, a thread pool, JIT-compiled loops.
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

public class Threads {
    public static void main(String[] args) throws Exception {
        long sum = 0;
        for (int round = 0; round < 20; round++) {
            List<Integer> list = new ArrayList<>();
            for (int i = 0; i < 200_000; i++) {
                list.add(i ^ round);
            }
            Collections.sort(list);
            sum += list.get(1234);
        }
        System.out.println("sorted " + sum);
        ExecutorService pool = Executors.newFixedThreadPool(3);
        List<Future<Long>> parts = new ArrayList<>();
        for (int t = 0; t < 6; t++) {
            final int k = t;
            parts.add(pool.submit(() -> {
                long x = 0;
                for (long i = 0; i < 10_000_000L; i++) {
                    x += i % (k + 3);
                }
                return x;
            }));
        }
        long total = 0;
        for (Future<Long> f : parts) {
            total += f.get();
        }
        pool.shutdown();
        System.out.println("threads " + total);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 100_000; i++) {
            sb.append(i % 10);
        }
        System.out.println("hash " + sb.toString().hashCode() + " " + String.format("%.6f", Math.sin(1.0)));
    }
}
