// The C API's buffer handle (shmoe_elastic_buffer_t of shmoe/elastic.h), shared by the C API of
// dispatch and combine (c_api.cpp) and that of the primitives (primitives_c_api.cpp).
#pragma once

#include "deep_ep/elastic_buffer.hpp"

struct shmoe_elastic_buffer {
  shmoe::deep_ep::ElasticBuffer impl;
};
