// The program of a layering check (CMakeLists.txt): it calls nothing; linking one layer's whole
// archive into it with only the layers below it is the check.
int main() { return 0; }
