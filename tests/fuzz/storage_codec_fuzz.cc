// Fuzzes the decoders of every value the state store reads back (stored
// bytes are outside bytes too): the blob envelope, document records, token
// lists, block manifests, state values and index entries, refs and ref
// keys. Input: one byte (bit 0: seal the rest in a valid envelope of the
// kind it picks, so the payload decoders are reached past the checksum)
// then the bytes. A value that decodes must re-encode to a value that
// decodes to the same thing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/blob_envelope.h"
#include "storage/block_manifest.h"
#include "storage/document_record.h"
#include "storage/record_codec.h"
#include "storage/record_validation.h"
#include "storage/state_key.h"
#include "storage/state_ref.h"
#include "storage/state_value.h"
#include "storage/token_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace s = twice::storage;

namespace {

s::StateKey Key(uint8_t fill) {
  s::StateKey key;
  key.digest.fill(fill);
  return key;
}

// Valid values of every kind, as seeds (control byte 0: decode as is).
void WriteSeeds() {
  s::DocumentRecord record;
  record.tenant = "default";
  record.document_id = "doc-1";
  record.model = "tiny";
  record.model_fingerprint = std::string(64, 'a');
  record.text_sha256 = std::string(64, 'b');
  record.token_count = 300;
  record.segment_tokens = 128;
  record.segments = {{128, Key(1)}, {256, Key(2)}, {300, Key(3)}};
  record.mode_states = {{"prefix", Key(4)}};
  record.pinned = true;
  record.created_unix_ms = 1700000000000;
  record.accessed_unix_ms = 1700000001000;
  s::BlockManifest manifest;
  manifest.recompute_tokens = 300;
  manifest.written_unix_ms = 1700000000000;
  manifest.blocks = {{Key(5), 1000, 77}, {Key(6), 200, 88}};
  s::StateIndexEntry index;
  index.stored_bytes = 4096;
  index.recompute_tokens = 300;
  index.written_unix_ms = 1700000000000;
  const std::vector<int32_t> tokens = {1, 2, 3, 50256, 0, 7};
  const std::pair<const char*, std::string> seeds[] = {
      {"record", s::EncodeRecord(record)},
      {"tokens", s::EncodeTokens(tokens)},
      {"tokens_empty", s::EncodeTokens({})},
      {"manifest", s::EncodeManifest(manifest)},
      {"state_value",
       s::EncodeStateValue("TWST-state-bytes", 300, 1700000000000)},
      {"state_index", s::EncodeStateIndex(index)},
      {"ref", s::EncodeRef(true)}};
  for (const auto& [name, value] : seeds) {
    const auto kind = s::PeekEnvelopeKind(value);
    if (!kind) twice::fuzz::Die(std::string("no envelope on ") + name);
    // The control byte that picks this kind (see kinds below), unsealed.
    const uint8_t control =
        static_cast<uint8_t>((static_cast<int>(*kind) - 1) << 1);
    twice::fuzz::MaybeWriteSeed(
        name, std::string(1, static_cast<char>(control)) + value);
  }
  twice::fuzz::MaybeWriteSeed(
      "ref_key", std::string(1, '\0') +
                     s::RefKey(Key(9), std::string("default\0doc-1", 13)));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  WriteSeeds();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const s::BlobKind kinds[] = {
      s::BlobKind::kState,         s::BlobKind::kRecord,
      s::BlobKind::kTokens,        s::BlobKind::kStateIndex,
      s::BlobKind::kBlockManifest, s::BlobKind::kRef};
  const s::BlobKind kind = kinds[(data[0] >> 1) % 6];
  std::string stored;
  if (data[0] & 1) {
    const std::string_view parts[] = {rest};
    stored = s::SealEnvelope(kind, parts);
  } else {
    stored = std::string(rest);
  }
  (void)s::PeekEnvelopeKind(stored);
  std::string copy;
  (void)s::OpenEnvelopeAndCopy(stored, kind, 3, &copy);
  switch (kind) {
    case s::BlobKind::kRecord:
      if (auto r = s::DecodeRecord(stored); r.ok()) {
        (void)s::ValidateDocumentRecord(*r);
        if (!s::DecodeRecord(s::EncodeRecord(*r)).ok()) {
          twice::fuzz::Die("a decoded record does not round-trip");
        }
      }
      break;
    case s::BlobKind::kTokens:
      if (auto t = s::DecodeTokens(stored); t.ok()) {
        auto again = s::DecodeTokens(s::EncodeTokens(*t));
        if (!again.ok() || *again != *t) {
          twice::fuzz::Die("decoded tokens do not round-trip");
        }
      }
      break;
    case s::BlobKind::kBlockManifest:
      if (auto m = s::DecodeManifest(stored); m.ok()) {
        if (!s::DecodeManifest(s::EncodeManifest(*m)).ok()) {
          twice::fuzz::Die("a decoded manifest does not round-trip");
        }
      }
      break;
    case s::BlobKind::kState: {
      (void)s::DecodeStateValue(stored);
      std::string blob;
      (void)s::DecodeStateValueCopy(stored, &blob);
      break;
    }
    case s::BlobKind::kStateIndex:
      if (auto e = s::DecodeStateIndex(stored); e.ok()) {
        if (!s::DecodeStateIndex(s::EncodeStateIndex(*e)).ok()) {
          twice::fuzz::Die("a decoded index entry does not round-trip");
        }
      }
      break;
    case s::BlobKind::kRef:
      (void)s::DecodeRef(stored);
      break;
  }
  (void)s::ParseRefKey(rest);
  return 0;
}
