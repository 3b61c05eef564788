/* The samples' shared synthetic model (samples/common), compiled into the Go trainer by cgo so
 * that it publishes exactly the bytes the C++ sample engines check. */
#include "../../common/synthetic_model.c"
