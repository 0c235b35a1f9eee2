#include "engine/models/model.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/util/absl_view.h"

namespace twice::engine {

absl::Status CheckStepBatchShape(absl::Span<const int32_t> tokens,
                                 absl::Span<SequenceState* const> states) {
  if (tokens.empty() || tokens.size() != states.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("StepBatch needs one token per state and at least one "
                     "of each, got ",
                     tokens.size(), " tokens and ", states.size(), " states"));
  }
  std::set<const SequenceState*> seen;
  for (const SequenceState* state : states) {
    if (state == nullptr || !seen.insert(state).second) {
      return absl::InvalidArgumentError(
          "StepBatch: every row needs its own non-null state");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Model::StepBatch(
    absl::Span<const int32_t> tokens,
    absl::Span<SequenceState* const> states) const {
  if (absl::Status shape = CheckStepBatchShape(tokens, states); !shape.ok()) {
    return shape;
  }
  // Step each row on a copy so that a failure in a later row leaves the
  // earlier states untouched too.
  std::vector<std::unique_ptr<SequenceState>> work;
  std::vector<float> logits;
  for (size_t b = 0; b < tokens.size(); ++b) {
    work.push_back(states[b]->Clone());
    absl::StatusOr<std::vector<float>> row = Step(tokens[b], *work.back());
    if (!row.ok()) return row.status();
    logits.insert(logits.end(), row->begin(), row->end());
  }
  for (size_t b = 0; b < tokens.size(); ++b) *states[b] = std::move(*work[b]);
  return logits;
}

absl::StatusOr<std::vector<int32_t>> Model::StepBatchSampled(
    absl::Span<const int32_t> tokens, absl::Span<SequenceState* const> states,
    absl::Span<const kernels::SamplingRule> rules) const {
  if (rules.size() != tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("StepBatchSampled: ", tokens.size(), " tokens and ",
                     rules.size(), " sampling rules"));
  }
  for (const kernels::SamplingRule& rule : rules) {
    if (absl::Status s = kernels::ValidateSamplingRule(rule); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<std::vector<float>> logits = StepBatch(tokens, states);
  if (!logits.ok()) return logits.status();
  const int64_t rows = static_cast<int64_t>(tokens.size());
  const int64_t width = description().padded_vocab_size;
  if (static_cast<int64_t>(logits->size()) != rows * width) {
    return absl::InternalError(absl::StrCat("StepBatch returned ",
                                            logits->size(), " logits for ",
                                            rows, " rows of ", width));
  }
  std::vector<int32_t> ids(tokens.size(), -1);
  absl::Status s = kernels::SampleRows(*logits, rows, width,
                                       std::max(description().vocab_size, 1),
                                       rules, absl::MakeSpan(ids));
  if (!s.ok()) return s;
  return ids;
}

absl::StatusOr<std::optional<DType>> ParseWeightsDType(std::string_view flag) {
  if (flag == "auto") return std::nullopt;
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI8}) {
    if (flag == DTypeFlagName(d)) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--weights_dtype must be auto, f32, bf16, f16 or int8, got \"",
      AbslView(flag), "\""));
}

std::string WeightsDTypeName(std::optional<DType> dtype) {
  return dtype.has_value() ? std::string(DTypeFlagName(*dtype)) : "auto";
}

}  // namespace twice::engine
