// What the tests of the RADOS store share: the local cluster ctest's
// ceph_cluster fixture started (scripts/ceph_dev_cluster.sh), and test
// bytes.
#ifndef TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_
#define TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace twice::storage::test_util {

// The test cluster's ceph.conf (TWICE_CEPH_CONF); empty when no fixture
// started one.
inline std::string ClusterConf() {
  const char* conf = std::getenv("TWICE_CEPH_CONF");
  return conf == nullptr ? "" : conf;
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

}  // namespace twice::storage::test_util

#endif  // TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_
