/* printf of many floats/doubles with %f %e %g %a, plus some libm. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    const double ds[] = {0.0, -0.0, 1.0, -1.5, 0.1, 1.0 / 3.0, 2.0 / 3.0, 3.141592653589793,
                         2.718281828459045, 1e-300, 1e300, 123456789.123456789, 5e-324,
                         DBL_MAX, DBL_MIN, DBL_EPSILON, 0.5, 1e22, 1e23, 9.999999999999999e22};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        double d = ds[i];
        printf("%zu: %f | %.17e | %g | %.10g | %a\n", i, d, d, d, d, d);
    }
    const float fs[] = {0.1f, 1.0f / 3.0f, 16777216.0f, 3.4e38f, 1.17549435e-38f};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
        printf("f%zu: %f | %e | %g | %a\n", i, fs[i], fs[i], fs[i], fs[i]);
    printf("inf: %f %e %g\n", INFINITY, -INFINITY, INFINITY);
    printf("nan: %f\n", fabs(NAN));
    printf("width: [%10.3f] [%-10.2e] [%+g] [%010.4f]\n", 3.14159, 2.5e-5, 42.0, -7.25);
    volatile double x = 2.0; /* volatile: make the compiler call libm at run time */
    printf("libm: sqrt=%.15g sin=%.15g exp=%.15g log=%.15g pow=%.15g\n", sqrt(x), sin(x), exp(x), log(x),
           pow(x, 0.5));
    printf("strtod: %.17g %.17g\n", strtod("0.1", NULL), strtod("1e-310", NULL));
    long double ld = 1.0L / 3.0L;
    printf("long double: %.20Lf\n", ld);
    return 0;
}
