// std::sort over a vector, plus std::map / std::string / std::unordered_map work.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

int main()
{
    std::vector<std::uint32_t> v;
    v.reserve(1000000);
    std::uint64_t s = 42;
    for (int i = 0; i < 1000000; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v.push_back(static_cast<std::uint32_t>(s >> 32));
    }
    std::sort(v.begin(), v.end());
    std::uint64_t sum = 0;
    for (auto x : v)
        sum = sum * 31 + x;
    std::cout << "sorted=" << (std::is_sorted(v.begin(), v.end()) ? "yes" : "no") << " min=" << v.front()
              << " max=" << v.back() << " checksum=" << std::hex << sum << std::dec << "\n";

    const char *words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
    std::map<std::string, int> counts;
    std::unordered_map<std::string, int> ucounts;
    for (int i = 0; i < 10000; i++) {
        std::string w = words[(i * 7 + i / 3) % 8];
        if (i % 5 == 0)
            w += "-" + std::to_string(i % 4);
        counts[w]++;
        ucounts[w]++;
    }
    for (const auto &kv : counts)
        std::cout << kv.first << " " << kv.second << (ucounts[kv.first] == kv.second ? "" : " MISMATCH")
                  << "\n";

    std::ostringstream os;
    for (int i = 0; i < 20; i++)
        os << i * i << ",";
    std::string joined = os.str();
    std::reverse(joined.begin(), joined.end());
    std::cout << "reversed=" << joined << " len=" << joined.size() << "\n";
    return 0;
}
