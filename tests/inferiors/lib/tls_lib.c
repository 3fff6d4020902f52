/* tls_lib.c: libtls_lib.so, linked into tls: a library's TLS block in every thread. */
__thread int lib_tls = 5;

void lib_tls_set(int value)
{
    lib_tls = value;
}
