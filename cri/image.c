#include "cri/image.h"

#include "cri/call.h"

#define DEFINE(...) NL_CRI__DEFINE_RPC_IN("ImageService", __VA_ARGS__)
NL_CRI_IMAGE_RPCS(DEFINE)
