/* Spins forever; used to test --timeout. */
int main(void)
{
    for (;;) {
    }
}
