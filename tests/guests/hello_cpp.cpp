// C++ iostream hello: exercises libstdc++ static initialisation.
#include <iostream>
#include <string>

int main()
{
    std::string who = "world";
    std::cout << "Hello, " << who << " from C++!" << std::endl;
    std::cerr << "this line goes to stderr" << std::endl;
    return 0;
}
