import java.net.InterfaceAddress;
import java.net.NetworkInterface;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** The loopback interface as the JVM lists it (SIOCGIFCONF and the other
 * interface ioctls, and /proc/net/if_inet6): only lo, which every Linux
 * machine has, so the output is the same natively. */
public class Interfaces {
    public static void main(String[] args) throws Exception {
        for (NetworkInterface n : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            if (!n.getName().equals("lo")) {
                continue;
            }
            System.out.println(n.getName() + " " + n.getIndex() + " up=" + n.isUp()
                    + " loopback=" + n.isLoopback() + " mtu=" + n.getMTU());
            List<String> addrs = new ArrayList<>();
            for (InterfaceAddress a : n.getInterfaceAddresses()) {
                addrs.add(a.getAddress().getHostAddress() + "/" + a.getNetworkPrefixLength());
            }
            Collections.sort(addrs);
            System.out.println(addrs);
        }
        System.out.println("by name: " + (NetworkInterface.getByName("lo") != null)
                + ", by index: " + NetworkInterface.getByIndex(1).getName());
    }
}
