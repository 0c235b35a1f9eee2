// What the validating wrappers of the paged kernels (paged_attention_ops.cc,
// rat_paged_ops.cc) share: the check that a pass's device copies (positions,
// block table) match the host copies the CPU twins' checks read, and the
// launch arguments of the pass's rows (launch::PassTableArgs).
#ifndef TWICE_KERNELS_CUDA_PASS_TABLE_ARGS_H_
#define TWICE_KERNELS_CUDA_PASS_TABLE_ARGS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda {

// Heads and head_dim travel to the paged kernels as int.
inline constexpr int64_t kMaxPagedDim = 65535;

// INVALID_ARGUMENT unless a device copy holds as many entries as its host
// copy.
[[nodiscard]] inline absl::Status CheckDeviceCopy(const char* op,
                                                  const char* what,
                                                  int64_t host_size,
                                                  int64_t device_size) {
  if (device_size != host_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the device ", what, " has ", device_size,
                     " entries, the host copy ", host_size));
  }
  return absl::OkStatus();
}

// The same for a pass's positions and block table.
[[nodiscard]] inline absl::Status CheckPassDeviceCopies(
    const char* op, const DevicePagedRows& rows,
    const DeviceBlockTableView& table) {
  if (absl::Status s = CheckDeviceCopy(
          op, "positions", static_cast<int64_t>(rows.positions_host.size()),
          rows.positions_device.size);
      !s.ok()) {
    return s;
  }
  return CheckDeviceCopy(op, "block table",
                         static_cast<int64_t>(table.host.size()),
                         table.device.size);
}

// `args`'s pass fields: the rows, their positions on the device (null for a
// prefill pass) and the table of blocks of `block_size` rows.
inline void SetPassTableArgs(const DevicePagedRows& rows,
                             const DeviceBlockTableView& table,
                             int64_t table_width, int64_t block_size,
                             launch::PassTableArgs& args) {
  args.rows = rows.rows;
  args.start = rows.start;
  args.positions =
      rows.positions_host.empty() ? nullptr : rows.positions_device.data;
  args.table = table.device.data;
  args.table_width = table_width;
  args.block_size = block_size;
}

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_PASS_TABLE_ARGS_H_
