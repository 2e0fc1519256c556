#include "cri/runtime.h"

#include "cri/call.h"

#define DEFINE(...) NL_CRI__DEFINE_RPC_IN("RuntimeService", __VA_ARGS__)
NL_CRI_RUNTIME_RPCS(DEFINE)
