// The resident memory of this process, for the process_resident_memory_bytes
// gauge every role exports (the name Prometheus' client libraries use).
#ifndef TWICE_SERVICES_COMMON_PROCESS_MEMORY_H_
#define TWICE_SERVICES_COMMON_PROCESS_MEMORY_H_

#include <cstdint>

namespace twice::services {

// Bytes of this process resident in RAM now (Linux: /proc/self/statm), or
// -1 when it cannot be read.
int64_t ResidentMemoryBytes();

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_PROCESS_MEMORY_H_
