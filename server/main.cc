// branchstub: a gdbserver-compatible remote debug server with branch tracing.
#include "server/run_branchstub.h"

int main(int argc, char** argv) { return server::run_branchstub(argc, argv); }
