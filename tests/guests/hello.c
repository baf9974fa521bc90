/* The smallest useful guest: one line on stdout, exit 0. */
#include <stdio.h>

int main(void)
{
    printf("Hello, world!\n");
    return 0;
}
