// What the tests of the RADOS store share: the local cluster ctest's
// ceph_cluster fixture started (scripts/ceph_dev_cluster.sh), and the
// store tests' helpers (records, tokens, random bytes).
#ifndef TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_
#define TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/storage/store_test_util.h"
#include "tests/testing/server_process.h"

namespace twice::storage::test_util {

// The test cluster's ceph.conf: TWICE_CEPH_CONF, else the one ctest's
// fixture starts under the build directory (TWICE_BINARY_DIR); empty when
// neither exists.
inline std::string ClusterConf() {
  if (const char* conf = std::getenv("TWICE_CEPH_CONF"); conf != nullptr) {
    return conf;
  }
  const std::string fixture =
      testing::BinaryDir() + "/ceph-test-cluster/ceph.conf";
  return std::filesystem::exists(fixture) ? fixture : "";
}

// Runs scripts/ceph_dev_cluster.sh `command` (kill-osd ID, start-osd ID,
// restart-mon ID, wait-clean SECONDS) on the test cluster; its exit code.
inline int ClusterCommand(const std::vector<std::string>& command) {
  std::string dir = ClusterConf();
  dir = dir.substr(0, dir.rfind('/'));
  std::vector<std::string> argv = {"scripts/ceph_dev_cluster.sh",
                                   command.front(), dir};
  argv.insert(argv.end(), command.begin() + 1, command.end());
  return testing::RunCommand(argv).exit_code;
}

}  // namespace twice::storage::test_util

#endif  // TWICE_TESTS_CEPH_CEPH_TEST_UTIL_H_
