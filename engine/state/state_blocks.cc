// State blocks, format version 1 (layout and rationale in state_blocks.h).
//
// Decoding order: the last block (the head) is opened first, so the rows
// every layer must end with are known before any row is appended; then the
// earlier blocks in order (rows appended, older heads only verified); then
// the heads of every layer, into a clone of the target that replaces it only
// when everything decoded.
#include "engine/state/state_blocks.h"

#include <xxhash.h>

#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/state/block_rows_state.h"
#include "engine/state/state_codec.h"
#include "engine/state/state_io.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

constexpr char kMagic[4] = {'T', 'W', 'S', 'B'};
constexpr char kWholeStateMagic[4] = {'T', 'W', 'S', 'T'};  // state_codec.h
constexpr uint32_t kVersion = 1;
constexpr uint32_t kRowsKind = 1;
constexpr uint32_t kHeadKind = 2;
constexpr char kStateDType[] = "f32";
// magic, version, kind, body bytes; and the trailing checksum.
constexpr size_t kFrameBytes = 4 + 4 + 4 + 8;
constexpr size_t kChecksumBytes = 8;
constexpr uint32_t kMaxFingerprint = 256;
constexpr uint32_t kMaxName = 64;

const BlockRowsState* RowsOf(const LayerState& layer) {
  return dynamic_cast<const BlockRowsState*>(&layer);
}
BlockRowsState* RowsOf(LayerState& layer) {
  return dynamic_cast<BlockRowsState*>(&layer);
}

// Starts a block: magic, version, kind and body length.
std::string BeginBlock(uint32_t kind, uint64_t body_bytes) {
  std::string out(kMagic, sizeof(kMagic));
  out.reserve(kFrameBytes + body_bytes + kChecksumBytes);
  StateWriter w(&out);
  w.WriteU32(kVersion);
  w.WriteU32(kind);
  w.WriteU64(body_bytes);
  return out;
}

void EndBlock(std::string& out) {
  StateWriter(&out).WriteU64(XXH3_64bits(out.data(), out.size()));
}

std::string EncodeRowsBlock(const SequenceState& state,
                            absl::Span<const int64_t> base_rows) {
  struct Entry {
    uint32_t layer;
    int64_t first;
    int64_t rows;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  uint64_t body = 4 + state.fingerprint().size() + 4;
  for (int i = 0; i < state.num_layers(); ++i) {
    const BlockRowsState* rows = RowsOf(state.layer(i));
    if (rows == nullptr || rows->row_count() == base_rows[i]) continue;
    const int64_t n = rows->row_count() - base_rows[i];
    entries.push_back({static_cast<uint32_t>(i), base_rows[i], n,
                       static_cast<uint64_t>(n * rows->row_bytes())});
    body += 4 + 8 + 8 + 8 + entries.back().bytes;
  }
  if (entries.empty()) return "";
  std::string out = BeginBlock(kRowsKind, body);
  StateWriter w(&out);
  w.WriteString(state.fingerprint());
  w.WriteU32(static_cast<uint32_t>(entries.size()));
  for (const Entry& e : entries) {
    w.WriteU32(e.layer);
    w.WriteI64(e.first);
    w.WriteI64(e.rows);
    w.WriteU64(e.bytes);
    out += RowsOf(state.layer(static_cast<int>(e.layer)))
               ->RowBytes(e.first, e.first + e.rows);
  }
  EndBlock(out);
  return out;
}

void WriteHeadBody(const SequenceState& state, StateWriter& w) {
  w.WriteString(state.fingerprint());
  w.WriteString(kStateDType);
  w.WriteI64(state.token_count());
  w.WriteU32(static_cast<uint32_t>(state.num_layers()));
  for (int i = 0; i < state.num_layers(); ++i) {
    const LayerState& layer = state.layer(i);
    const BlockRowsState* rows = RowsOf(layer);
    w.WriteString(layer.kind());
    if (rows != nullptr) {
      w.WriteI64(rows->row_count());
      w.WriteU64(static_cast<uint64_t>(
          CountBytes([&](StateWriter& c) { rows->SerializeHead(c); })));
      rows->SerializeHead(w);
    } else {
      w.WriteI64(-1);
      w.WriteU64(static_cast<uint64_t>(layer.ByteSize()));
      layer.Serialize(w);
    }
  }
}

std::string EncodeHeadBlock(const SequenceState& state) {
  const int64_t body =
      CountBytes([&](StateWriter& c) { WriteHeadBody(state, c); });
  std::string out = BeginBlock(kHeadKind, static_cast<uint64_t>(body));
  StateWriter w(&out);
  WriteHeadBody(state, w);
  EndBlock(out);
  return out;
}

struct OpenedBlock {
  uint32_t kind = 0;
  std::string_view body;
};

// Checks a block's frame and checksum; `index` names it in errors.
absl::StatusOr<OpenedBlock> OpenBlock(std::string_view blob, size_t index) {
  if (blob.size() < kFrameBytes + kChecksumBytes) {
    return absl::DataLossError(absl::StrCat(
        "state block ", index, " of ", blob.size(), " bytes is too short"));
  }
  if (std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(
        "state block ", index, " is not a state block (bad magic)"));
  }
  StateReader frame(blob.substr(sizeof(kMagic), kFrameBytes - sizeof(kMagic)));
  TWICE_ASSIGN_OR_RETURN(uint32_t version, frame.ReadU32());
  TWICE_ASSIGN_OR_RETURN(uint32_t kind, frame.ReadU32());
  TWICE_ASSIGN_OR_RETURN(uint64_t body_bytes, frame.ReadU64());
  if (version != kVersion) {
    return absl::DataLossError(
        absl::StrCat("state block ", index, ": format version ", version,
                     " is not supported (expected ", kVersion, ")"));
  }
  if (kind != kRowsKind && kind != kHeadKind) {
    return absl::DataLossError(
        absl::StrCat("state block ", index, ": unknown kind ", kind));
  }
  if (body_bytes != blob.size() - kFrameBytes - kChecksumBytes) {
    return absl::DataLossError(absl::StrCat("state block ", index, ": body of ",
                                            body_bytes, " bytes in a block of ",
                                            blob.size()));
  }
  const size_t checked = blob.size() - kChecksumBytes;
  uint64_t stored_checksum;
  std::memcpy(&stored_checksum, blob.data() + checked, kChecksumBytes);
  if (XXH3_64bits(blob.data(), checked) != stored_checksum) {
    return absl::DataLossError(
        absl::StrCat("state block ", index, ": checksum mismatch"));
  }
  return OpenedBlock{kind, blob.substr(kFrameBytes, body_bytes)};
}

// What the last head says of each layer.
struct LayerHead {
  int64_t rows = -1;  // -1: stored whole in `section`
  std::string_view section;
};

struct Head {
  int64_t token_count = 0;
  std::vector<LayerHead> layers;
};

absl::StatusOr<Head> ReadHead(std::string_view body,
                              const SequenceState& target) {
  StateReader h(body);
  TWICE_ASSIGN_OR_RETURN(std::string_view fingerprint,
                         h.ReadString(kMaxFingerprint));
  if (fingerprint != target.fingerprint()) {
    return absl::FailedPreconditionError(
        absl::StrCat("state belongs to model ", AbslView(fingerprint),
                     ", not to ", target.fingerprint()));
  }
  TWICE_ASSIGN_OR_RETURN(std::string_view dtype, h.ReadString(kMaxName));
  if (dtype != kStateDType) {
    return absl::FailedPreconditionError(
        absl::StrCat("state dtype '", AbslView(dtype),
                     "' is not supported (expected ", kStateDType, ")"));
  }
  Head head;
  TWICE_ASSIGN_OR_RETURN(head.token_count, h.ReadI64());
  TWICE_ASSIGN_OR_RETURN(uint32_t num_layers, h.ReadU32());
  if (head.token_count < 0 ||
      num_layers != static_cast<uint32_t>(target.num_layers())) {
    return absl::DataLossError(absl::StrCat(
        "state head is inconsistent (token count ", head.token_count, ", ",
        num_layers, " layers for a model of ", target.num_layers(), ")"));
  }
  head.layers.resize(num_layers);
  for (int i = 0; i < target.num_layers(); ++i) {
    const LayerState& layer = target.layer(i);
    TWICE_ASSIGN_OR_RETURN(std::string_view kind, h.ReadString(kMaxName));
    if (kind != layer.kind()) {
      return absl::DataLossError(
          absl::StrCat("state head: layer ", i, " is '", AbslView(kind),
                       "', the model expects '", AbslView(layer.kind()), "'"));
    }
    TWICE_ASSIGN_OR_RETURN(head.layers[i].rows, h.ReadI64());
    const bool has_rows = RowsOf(layer) != nullptr;
    if (has_rows ? head.layers[i].rows < 0 : head.layers[i].rows != -1) {
      return absl::DataLossError(absl::StrCat(
          "state head: layer ", i, " has row count ", head.layers[i].rows));
    }
    TWICE_ASSIGN_OR_RETURN(uint64_t section_bytes, h.ReadU64());
    TWICE_ASSIGN_OR_RETURN(head.layers[i].section, h.ReadBytes(section_bytes));
  }
  if (h.remaining() != 0) {
    return absl::DataLossError(
        absl::StrCat("state head has ", h.remaining(), " trailing bytes"));
  }
  return head;
}

// Appends the rows of one rows block to `work`, never past the head's rows.
absl::Status ApplyRows(std::string_view body, size_t index, const Head& head,
                       SequenceState& work) {
  StateReader r(body);
  TWICE_ASSIGN_OR_RETURN(std::string_view fingerprint,
                         r.ReadString(kMaxFingerprint));
  if (fingerprint != work.fingerprint()) {
    return absl::DataLossError(absl::StrCat(
        "state block ", index, " belongs to another model's state"));
  }
  TWICE_ASSIGN_OR_RETURN(uint32_t entries, r.ReadU32());
  for (uint32_t e = 0; e < entries; ++e) {
    TWICE_ASSIGN_OR_RETURN(uint32_t layer, r.ReadU32());
    TWICE_ASSIGN_OR_RETURN(int64_t first, r.ReadI64());
    TWICE_ASSIGN_OR_RETURN(int64_t rows, r.ReadI64());
    TWICE_ASSIGN_OR_RETURN(uint64_t bytes, r.ReadU64());
    BlockRowsState* target = layer < static_cast<uint32_t>(work.num_layers())
                                 ? RowsOf(work.layer(static_cast<int>(layer)))
                                 : nullptr;
    if (target == nullptr) {
      return absl::DataLossError(absl::StrCat("state block ", index, ": layer ",
                                              layer, " holds no rows"));
    }
    const int64_t want = head.layers[layer].rows;
    const uint64_t row_bytes = static_cast<uint64_t>(target->row_bytes());
    if (first != target->row_count() || rows < 0 || rows > want - first ||
        static_cast<uint64_t>(rows) > r.remaining() / row_bytes ||
        bytes != static_cast<uint64_t>(rows) * row_bytes) {
      return absl::DataLossError(absl::StrCat(
          "state block ", index, ": layer ", layer, " rows [", first, ", +",
          rows, ") in ", bytes, " bytes do not follow the ",
          target->row_count(), " rows held (of ", want, ")"));
    }
    TWICE_ASSIGN_OR_RETURN(std::string_view data, r.ReadBytes(bytes));
    absl::Status appended = target->AppendRows(data);
    if (!appended.ok()) {
      return absl::DataLossError(absl::StrCat("state block ", index, ": layer ",
                                              layer, ": ", appended.message()));
    }
  }
  if (r.remaining() != 0) {
    return absl::DataLossError(absl::StrCat("state block ", index, " has ",
                                            r.remaining(), " trailing bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

bool HasBlockRows(const SequenceState& state) {
  for (int i = 0; i < state.num_layers(); ++i) {
    if (RowsOf(state.layer(i)) != nullptr) return true;
  }
  return false;
}

std::vector<int64_t> StateRowCounts(const SequenceState& state) {
  std::vector<int64_t> rows(state.num_layers(), 0);
  for (int i = 0; i < state.num_layers(); ++i) {
    const BlockRowsState* r = RowsOf(state.layer(i));
    if (r != nullptr) rows[i] = r->row_count();
  }
  return rows;
}

absl::StatusOr<std::vector<std::string>> EncodeStateBlocks(
    const SequenceState& state, absl::Span<const int64_t> base_rows) {
  TWICE_RETURN_IF_ERROR(state.SyncToHost());
  std::vector<int64_t> base(state.num_layers(), 0);
  if (!base_rows.empty()) {
    if (base_rows.size() != base.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("base rows name ", base_rows.size(),
                       " layers, the state has ", base.size()));
    }
    for (int i = 0; i < state.num_layers(); ++i) {
      const BlockRowsState* rows = RowsOf(state.layer(i));
      const int64_t held = rows != nullptr ? rows->row_count() : 0;
      if (base_rows[i] < 0 || base_rows[i] > held) {
        return absl::InvalidArgumentError(
            absl::StrCat("base holds ", base_rows[i], " rows of layer ", i,
                         ", which holds ", held));
      }
      base[i] = base_rows[i];
    }
  }
  std::vector<std::string> blocks;
  std::string rows = EncodeRowsBlock(state, base);
  if (!rows.empty()) blocks.push_back(std::move(rows));
  blocks.push_back(EncodeHeadBlock(state));
  return blocks;
}

absl::Status DecodeStateBlocksInto(absl::Span<const std::string> blocks,
                                   SequenceState& empty) {
  if (blocks.empty()) return absl::DataLossError("a state has no blocks");
  if (blocks.size() == 1 && blocks[0].size() >= sizeof(kWholeStateMagic) &&
      std::memcmp(blocks[0].data(), kWholeStateMagic,
                  sizeof(kWholeStateMagic)) == 0) {
    return DecodeStateInto(blocks[0], empty);
  }
  const size_t last = blocks.size() - 1;
  TWICE_ASSIGN_OR_RETURN(OpenedBlock head_block, OpenBlock(blocks[last], last));
  if (head_block.kind != kHeadKind) {
    return absl::DataLossError("the last state block is not a head");
  }
  TWICE_ASSIGN_OR_RETURN(Head head, ReadHead(head_block.body, empty));

  std::unique_ptr<SequenceState> work = empty.Clone();
  for (int i = 0; i < work->num_layers(); ++i) {
    const BlockRowsState* rows = RowsOf(work->layer(i));
    if (rows != nullptr && rows->row_count() != 0) {
      return absl::FailedPreconditionError(
          "decoding state blocks needs a fresh state");
    }
  }
  for (size_t b = 0; b < last; ++b) {
    TWICE_ASSIGN_OR_RETURN(OpenedBlock block, OpenBlock(blocks[b], b));
    if (block.kind == kHeadKind) continue;  // an older head: superseded
    TWICE_RETURN_IF_ERROR(ApplyRows(block.body, b, head, *work));
  }
  for (int i = 0; i < work->num_layers(); ++i) {
    LayerState& layer = work->layer(i);
    BlockRowsState* rows = RowsOf(layer);
    if (rows != nullptr && rows->row_count() != head.layers[i].rows) {
      return absl::DataLossError(absl::StrCat(
          "state blocks hold ", rows->row_count(), " rows of layer ", i,
          ", the head expects ", head.layers[i].rows));
    }
    StateReader section(head.layers[i].section);
    absl::Status s = rows != nullptr ? rows->DeserializeHead(section)
                                     : layer.Deserialize(section);
    if (!s.ok()) {
      return absl::DataLossError(
          absl::StrCat("state head: layer ", i, ": ", s.message()));
    }
    if (section.remaining() != 0) {
      return absl::DataLossError(absl::StrCat("state head: layer ", i, " has ",
                                              section.remaining(),
                                              " unread bytes"));
    }
  }
  work->set_token_count(head.token_count);
  empty = std::move(*work);
  return absl::OkStatus();
}

}  // namespace twice::engine
