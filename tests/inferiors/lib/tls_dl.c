/* tls_dl.c: libtls_dl.so, dlopen'ed by tls after its workers started: dynamic TLS that only
 * the threads touching dl_tls get storage for. */
__thread int dl_tls = 9;

void dl_tls_set(int value)
{
    dl_tls = value;
}
