// ModelCards: what the orchestrator knows of the models it routes to.
//
// The orchestrator never runs a model: it tokenizes, checks token ids and
// plans segments. So it holds each model's tokenizer and public description
// (ModelInfo: fingerprint, vocabulary, training context, modes), not its
// weights. In role all the cards come from the models the process loaded
// anyway; a separate orchestrator reads only tokenizer.json from each model
// directory and asks the prefill service for the rest (DescribeModels) the
// first time a model is used, checking that both tokenize alike (the
// tokenizer's SHA-256). Until a prefill endpoint answers, calls that need
// the model get its UNAVAILABLE.
//
// A card, once described, does not change for the life of the process:
// like the model files it was made from, a new model version takes a
// restart. Thread-safe.
#ifndef TWICE_SERVICES_ORCHESTRATOR_MODEL_CARDS_H_
#define TWICE_SERVICES_ORCHESTRATOR_MODEL_CARDS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/tokenizer/tokenizer.h"
#include "services/common/model_registry.h"
#include "twice/v1/common.pb.h"

namespace twice::services {

class ModelCard {
 public:
  ModelCard(v1::ModelInfo info, const engine::Tokenizer* tokenizer)
      : info_(std::move(info)), tokenizer_(tokenizer) {}

  const v1::ModelInfo& info() const { return info_; }
  const std::string& name() const { return info_.name(); }
  const std::string& fingerprint() const { return info_.fingerprint(); }
  int64_t training_context() const { return info_.training_context(); }
  const engine::Tokenizer& tokenizer() const { return *tokenizer_; }
  // Whether the model has a JRT prefix encoder (the prefix ask modes).
  bool has_prefix_encoder() const;

  // INVALID_ARGUMENT naming `what`, the id and its position (counted from
  // `offset`) for the first id outside the vocabulary.
  [[nodiscard]] absl::Status CheckTokenIds(absl::Span<const int32_t> ids,
                                           std::string_view what,
                                           int64_t offset = 0) const;
  // UNIMPLEMENTED naming the model, for a prefix request to a model without
  // a prefix encoder.
  absl::Status NoPrefixEncoder() const;

 private:
  v1::ModelInfo info_;
  const engine::Tokenizer* tokenizer_;
};

// Describes the served models (Prefill.DescribeModels on some endpoint).
using ModelDescriber =
    std::function<absl::StatusOr<std::vector<v1::ModelInfo>>()>;

class ModelCards {
 public:
  // Role all: a card for every model of `registry` (which must outlive the
  // cards), described at once.
  static std::unique_ptr<ModelCards> FromRegistry(
      const ModelRegistry& registry);
  ModelCards() = default;

  // Separate orchestrator: model `name` tokenized with `dir`/tokenizer.json;
  // the rest of its card comes from the describer. The first model added is
  // the default. Call before serving.
  [[nodiscard]] absl::Status AddTokenizerOnly(const std::string& name,
                                              const std::string& dir);
  // Where undescribed cards get described. Call before serving.
  void SetDescriber(ModelDescriber describer);

  // The card of model `name` (empty = the default), described first when it
  // is not yet. NOT_FOUND naming the known models; the describer's error
  // (UNAVAILABLE while no prefill endpoint answers); FAILED_PRECONDITION
  // when the prefill service does not serve the model or tokenizes it with
  // another tokenizer.json.
  [[nodiscard]] absl::StatusOr<const ModelCard*> Find(std::string_view name);
  // Resolves an empty name to the default model's name.
  std::string Resolve(std::string_view name) const;
  const std::string& default_name() const { return default_name_; }
  std::vector<std::string> names() const;

 private:
  struct Entry {
    std::string dir;  // empty for registry cards
    // Owned for tokenizer-only cards; the registry's model's otherwise.
    std::unique_ptr<engine::Tokenizer> owned_tokenizer;
    const engine::Tokenizer* tokenizer = nullptr;
    std::string tokenizer_sha256;
    std::unique_ptr<const ModelCard> card;  // set once described
  };
  // Fills every undescribed card from one DescribeModels answer.
  absl::Status DescribeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The set of names is fixed before serving; only `card`s are filled in.
  std::map<std::string, Entry, std::less<>> entries_;
  std::string default_name_;
  ModelDescriber describer_;
  absl::Mutex mu_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_MODEL_CARDS_H_
