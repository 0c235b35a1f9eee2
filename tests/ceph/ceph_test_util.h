// What the tests of the RADOS store share: the local cluster ctest's
// ceph_cluster fixture started (scripts/ceph_dev_cluster.sh), and the
// store tests' helpers (records, tokens, random bytes).
#ifndef TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_
#define TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_

#include <cstdlib>
#include <string>

#include "tests/storage/store_test_util.h"

namespace twice::storage::test_util {

// The test cluster's ceph.conf (TWICE_CEPH_CONF); empty when no fixture
// started one.
inline std::string ClusterConf() {
  const char* conf = std::getenv("TWICE_CEPH_CONF");
  return conf == nullptr ? "" : conf;
}

}  // namespace twice::storage::test_util

#endif  // TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_
