/* Typed async wrappers for runtime.v1.ImageService:
 *   nl_cri_list_images, nl_cri_image_status, nl_cri_pull_image,
 *   nl_cri_remove_image, nl_cri_image_fs_info
 * with the signatures and the ownership contract of cri/runtime.h and
 * cri/conn.h. PullImage runs under opts.pull_timeout_ms instead of the request
 * timeout. ImageStatus of a missing image is OK with resp->image == NULL. */
#ifndef NL_CRI_IMAGE_H
#define NL_CRI_IMAGE_H

#include "cri/conn.h"

#define NL_CRI_IMAGE_RPCS(X)                                                                    \
  X(list_images, ListImages, ListImagesRequest, ListImagesResponse, list_images_response,       \
    DEFAULT)                                                                                    \
  X(image_status, ImageStatus, ImageStatusRequest, ImageStatusResponse, image_status_response,  \
    DEFAULT)                                                                                    \
  X(pull_image, PullImage, PullImageRequest, PullImageResponse, pull_image_response, PULL)      \
  X(remove_image, RemoveImage, RemoveImageRequest, RemoveImageResponse, remove_image_response,  \
    DEFAULT)                                                                                    \
  X(image_fs_info, ImageFsInfo, ImageFsInfoRequest, ImageFsInfoResponse,                        \
    image_fs_info_response, DEFAULT)

NL_CRI_IMAGE_RPCS(NL_CRI__DECLARE_RPC)

#endif
