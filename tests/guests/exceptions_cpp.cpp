// C++ exceptions: std::runtime_error, a custom type, rethrow, and unwinding through frames.
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct MyError {
    int code;
    std::string what;
};

struct Guard {
    std::string name;
    ~Guard() { std::cout << "unwound " << name << "\n"; }
};

static int depth(int n)
{
    Guard g{"frame " + std::to_string(n)};
    if (n == 0)
        throw MyError{7, "deep failure"};
    return depth(n - 1) + 1;
}

int main()
{
    try {
        throw std::runtime_error("runtime error message");
    } catch (const std::exception &e) {
        std::cout << "caught std::exception: " << e.what() << "\n";
    }
    try {
        depth(3);
    } catch (const MyError &e) {
        std::cout << "caught MyError code=" << e.code << " what=" << e.what << "\n";
    }
    try {
        try {
            std::vector<int> v(3);
            (void)v.at(10);
        } catch (const std::out_of_range &) {
            std::cout << "caught out_of_range, rethrowing\n";
            throw;
        }
    } catch (const std::logic_error &e) {
        std::cout << "caught logic_error after rethrow\n";
    }
    try {
        auto p = std::make_unique<int>(5);
        throw *p;
    } catch (int v) {
        std::cout << "caught int " << v << "\n";
    }
    std::cerr << "done with exceptions\n";
    return 0;
}
