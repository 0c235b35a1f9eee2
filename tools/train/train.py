"""Train a tiny Based, JRT-RNN, Mamba-2, Llama or Nemotron-H model on the document-QA
task (task.py) on CPU and export the HF-layout directory the engine loads.

  /usr/bin/python3 tools/train/train.py --arch based --out models/based-qa

Recipes:
  * next-token loss on answer tokens (the value after "A:");
  * formats: default, read_twice and read_twice_full (question before the
    document), so the model has seen every ask mode's input;
  * JRT-RNN (--arch jrt): prefix batches put the document (left-padded with
    [PAD] to the curriculum's document length; served documents of M =
    enc_length words or more need no pads) in the non-causal encoder
    region; 15 % of the prefix's non-fact tokens are replaced by [MASK] and
    predicted at their own position (prefix MLM), plus the next-token loss
    on the suffix; with --formats prefix_with_question:W, batches whose
    encoder region starts with the question ("Q: q D:" then the
    document), so the encoder can learn to keep what will be asked;
  * curriculum: short documents with few facts first; harder ones only
    while the answer loss is low (--curriculum-loss, --ramp-steps);
  * reading targets (--early-answer, --hold-question): where the question
    comes before a reading, that reading's positions are trained to name
    the asked key until its fact and the answer from there on (how the -rt
    models learnt to store selectively);
  * --init-from DIR: warm start from a trained model directory;
  * --state-passing: the detached final state of each batch row is the
    initial state of the next batch's row, reset to zero with probability
    --reset-prob (0.1);
  * --tbptt N: each batch is N consecutive segments of one long document
    (state carried with gradients cut between segments), questions after the
    last segment.
After training the exported directory is checked against the float64
reference (tools/reference) and a quick held-out accuracy is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import task  # noqa: E402
from models import BasedLM, LlamaLM, Mamba2LM, NemotronHLM, detach_state  # noqa: E402
from reference.safetensors_io import write_safetensors  # noqa: E402


def init_from(model, path):
    """Warm start from a trained model directory: every tensor of the same
    name and shape is copied; a JRT encoder projection missing there starts
    as its decoder twin (proj_k_enc = proj_k, proj_v_enc = proj_v)."""
    from reference.safetensors_io import read_safetensors
    tensors, _ = read_safetensors(os.path.join(path, "model.safetensors"))
    copied = 0
    with torch.no_grad():
        for name in model.names:
            src = tensors.get(name)
            if src is None and name.endswith("_enc.weight"):
                src = tensors.get(name.replace("_enc.weight", ".weight"))
            if src is not None and tuple(src.shape) == tuple(model.w(name).shape):
                model.w(name).copy_(src.float())
                copied += 1
    print(f"init from {path}: {copied} of {len(model.names)} tensors", flush=True)


def make_config(arch: str, vocab: int, doc_len: int, pad_id: int,
                d_state: int = 32, feature_dim: int = 16, layers: int = 4,
                heads: int = 4, rope_theta: float = 10000.0,
                pattern: str = "M*M-", kv_heads: int = 1,
                window_size: int = 64) -> dict:
    templates = {"prompt_templates": task.prompt_templates()}
    if arch in ("based", "jrt"):
        c = {
            "architecture": arch, "model_type": arch, "vocab_size": vocab,
            "pad_vocab_size_multiple": 8, "layer_norm_epsilon": 1e-5,
            "rotary_emb_base": 10000.0, "activation_function": "swiglu",
            "rms_norm": True, "residual_in_fp32": True, "tie_word_embeddings": True,
            "training_context": doc_len,
            "mixer": {"expand_proj": 4, "kernel_sizes": 3, "use_bias": True},
            "n_embd": 64, "n_layer": 4, "n_head": 4, "n_inner": 256,
            "alt_mixer": {"feature_dim": feature_dim, "num_heads": 4},
            "alt_mixer_2": {"window_size": window_size},
            "alt_mixer_layers": [1, 3], "alt_mixer_2_layers": [2],
        }
        if arch == "jrt":
            c["alt_mixer"]["_target_"] = (
                "based.models.mixers.prefix_linear_attention.PrefixLinearAttention")
            c["alt_mixer"]["enc_length"] = doc_len
            c["enc_length"] = doc_len
            c["prefix_pad_token_id"] = pad_id
    elif arch == "mamba2":
        c = {
            "architecture": "mamba2", "d_model": 64, "n_layer": 4, "d_intermediate": 0,
            "vocab_size": vocab,
            "ssm_cfg": {"layer": "Mamba2", "d_conv": 4, "expand": 2, "ngroups": 1,
                        "d_state": d_state, "headdim": 16, "chunk_size": 64},
            "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True,
            "residual_in_fp32": True, "fused_add_norm": True,
            "pad_vocab_size_multiple": 16, "tie_embeddings": True,
            "training_context": doc_len,
        }
    elif arch == "llama":
        c = {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": vocab, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
            "max_position_embeddings": 8192, "rope_scaling": None,
            "hidden_size": 64, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": heads, "intermediate_size": 256, "rope_theta": rope_theta,
        }
    elif arch == "nemotron_h":
        # d 64 as every tiny model here; Mamba 8 heads of P 16 over 2 groups
        # (N = --d-state), attention 4 heads over --kv-heads KV heads of 16
        # without positional encoding, relu^2 MLP 256.
        c = {
            "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
            "vocab_size": vocab, "hidden_size": 64, "hybrid_override_pattern": pattern,
            "num_hidden_layers": len(pattern), "mamba_num_heads": 8, "mamba_head_dim": 16,
            "n_groups": 2, "ssm_state_size": d_state, "conv_kernel": 4, "chunk_size": 64,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": 16,
            "intermediate_size": 256, "mlp_hidden_act": "relu2", "mamba_hidden_act": "silu",
            "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "use_bias": False,
            "use_conv_bias": True, "max_position_embeddings": 8192,
            "training_context": doc_len,
        }
    else:
        raise ValueError(arch)
    c["eos_token_id"] = task.token_ids()["</s>"]
    c["twice"] = templates
    return c


def build_model(arch, cfg, seed):
    if arch in ("based", "jrt"):
        return BasedLM(cfg, seed)
    if arch == "mamba2":
        return Mamba2LM(cfg, seed)
    if arch == "nemotron_h":
        return NemotronHLM(cfg, seed)
    return LlamaLM(cfg, seed)


def batch(rng, fmt, args, vocab, max_facts):
    """A batch of one format, right-padded with [PAD] (no loss) to its
    longest row."""
    toks, masks, early, held = [], [], [], []
    for _ in range(args.batch):
        positions, held_positions = [], []
        t, m, _ = task.training_example(rng, fmt, args.doc_len, vocab, max_facts,
                                        max_doc_len=args.cur_doc_len,
                                        answer_after_fact=positions,
                                        question_held=held_positions)
        toks.append(t)
        masks.append(m)
        early.append(positions)
        held.append(held_positions)
    width = max(len(t) for t in toks)
    pad = vocab["[PAD]"]
    toks = [t + [pad] * (width - len(t)) for t in toks]
    masks = [m + [0] * (width - len(m)) for m in masks]
    # Reading targets (--early-answer, --hold-question), for rows whose
    # question comes before a reading of the document: at the positions of
    # that reading before the asked fact, the asked key (weight
    # hold_question / early_answer); from the fact's value on, the answer
    # (weight 1). Scaled by --early-answer in the loss.
    early_weight = torch.zeros(len(toks), width)
    early_target = torch.zeros(len(toks), width, dtype=torch.long)
    for b, positions in enumerate(early):
        if not positions:
            continue
        first = masks[b].index(1)  # the answer token
        early_weight[b, positions] = 1.0
        early_target[b, positions] = toks[b][first]
        if args.hold_question > 0:
            # The asked key: "K ? A: V" ends read_twice rows; question_first
            # rows start "Q: what is K".
            key = toks[b][first - 3] if fmt != "question_first" else toks[b][3]
            early_weight[b, held[b]] = args.hold_question / args.early_answer
            early_target[b, held[b]] = key
    return (torch.tensor(toks), torch.tensor(masks, dtype=torch.float32),
            early_target, early_weight)


def early_answer_loss(logits, target, weight):
    """Weighted mean cross-entropy of the reading targets."""
    lp = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                         reduction="none")
    w = weight.reshape(-1)
    return (lp * w).sum() / w.sum().clamp(min=1)


def answer_loss(logits, tokens, mask):
    lp = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                         tokens[:, 1:].reshape(-1), reduction="none")
    m = mask[:, 1:].reshape(-1)
    return (lp * m).sum() / m.sum().clamp(min=1)


def sequence_loss(logits, tokens, pad_id):
    """Mean next-token cross-entropy over every non-pad position. In rows
    that read the document twice the second reading is predictable from the
    first by copying, which is the dense signal a Transformer needs to form
    its copying (induction) heads; the answer loss alone gives one token
    per question."""
    lp = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                         tokens[:, 1:].reshape(-1), reduction="none")
    m = (tokens[:, 1:] != pad_id).reshape(-1).float()
    return (lp * m).sum() / m.sum().clamp(min=1)


def mlm_corrupt(rng, tokens, prefix_len, vocab):
    """15 % of the prefix's real non-fact tokens -> [MASK]; returns the
    corrupted tokens and the MLM target mask."""
    fact_ids = {vocab[w] for w in task.KEYS + task.VALUES}
    skip = fact_ids | {vocab["[PAD]"]}
    t = tokens.clone()
    target = torch.zeros_like(tokens, dtype=torch.float32)
    for b in range(tokens.shape[0]):
        for i in range(prefix_len):
            if int(tokens[b, i]) not in skip and rng.random() < 0.15:
                t[b, i] = vocab["[MASK]"]
                target[b, i] = 1.0
    return t, target


def tbptt_batch(rng, args, vocab, max_facts):
    """N consecutive segments of one long document per row: facts anywhere;
    the last segment ends with questions. Returns a list of (tokens, mask)."""
    n = args.tbptt
    seg = args.seq_len
    rows = []
    for _ in range(args.batch):
        nf = rng.randint(1, max_facts)
        words, facts = task.make_document(rng, nf, n * seg - 7 * 8, held_out=False)
        toks = [vocab[w] for w in words]
        mask = [0] * len(toks)
        while len(toks) < n * seg:
            k, v, _ = rng.choice(facts)
            q, m = task._qa(k, v, vocab)
            toks += q
            mask += m
        rows.append((toks[: n * seg], mask[: n * seg]))
    tokens = torch.tensor([r[0] for r in rows])
    masks = torch.tensor([r[1] for r in rows], dtype=torch.float32)
    return [(tokens[:, i * seg:(i + 1) * seg], masks[:, i * seg:(i + 1) * seg]) for i in range(n)]


@torch.no_grad()
def quick_eval(model, arch, args, vocab, seed=1234):
    """Held-out accuracy in the default and read_twice (and, for JRT,
    prefix) formats on documents of doc_len words: greedy first token ==
    value."""
    rng = random.Random(seed)
    out = {}
    for n_facts in (2, 4, 8, 12, 16, 24):
        if 4 * n_facts > args.doc_len:
            continue
        rows, twice, with_question, answers = [], [], [], []
        for _ in range(64):
            words, facts = task.make_document(rng, n_facts, args.doc_len, held_out=True)
            k, v, _ = rng.choice(facts)
            doc = [vocab[w] for w in words]
            question = [vocab[w] for w in ["Q:", "what", "is", task.KEYS[k], "?"]]
            rows.append(doc + question + [vocab["A:"]])
            twice.append(doc + question + [vocab["D:"]] + doc + question + [vocab["A:"]])
            with_question.append(question + [vocab["D:"]] + doc + question + [vocab["A:"]])
            answers.append(vocab[task.VALUES[v]])
        modes = [("default", 0, rows), ("read_twice", 0, twice)]
        if arch == "jrt":
            modes.append(("prefix", args.doc_len, rows))
            modes.append(("prefix_with_question", args.doc_len, with_question))
        for mode, enc, batch_rows in modes:
            tokens = torch.tensor(batch_rows)
            logits, _ = model(tokens, None, keep=None, enc=enc)
            pred = logits[:, -1, : len(vocab)].argmax(-1)
            acc = (pred == torch.tensor(answers)).float().mean().item()
            out[f"{mode}/f{n_facts}"] = round(acc, 3)
    return out


@torch.no_grad()
def check_against_reference(out_dir, arch, model, vocab):
    """Logits of the exported directory through tools/reference (float64)
    against the training form (float32) on one held-out document."""
    rng = random.Random(7)
    words, facts = task.make_document(rng, 8, 96, held_out=True)
    toks = [vocab[w] for w in words] + [vocab[w] for w in ["Q:", "what", "is", task.KEYS[facts[0][0]], "?", "A:"]]
    ours, _ = model(torch.tensor([toks]), None)
    if arch in ("based", "jrt"):
        from reference.model import ReferenceModel
        ref = ReferenceModel.from_dir(out_dir)
        theirs = ref.prefill(toks, ref.new_state())
    elif arch == "mamba2":
        from reference.mamba2 import Mamba2Reference
        ref = Mamba2Reference.from_dir(out_dir)
        theirs = ref.prefill(toks, ref.new_state())
    elif arch == "nemotron_h":
        from reference.nemotron_h import NemotronHReference
        ref = NemotronHReference.from_dir(out_dir)
        theirs = ref.prefill(toks, ref.new_state())
    else:
        from reference.llama import LlamaReference
        ref = LlamaReference.from_dir(out_dir)
        theirs = ref.prefill(toks, ref.new_state())
    diff = (ours[0].double() - theirs[:, : ours.shape[-1]]).abs().max().item()
    result = {"causal_max_abs_diff": diff}
    if arch == "jrt":
        from reference.model import prefix_inputs
        doc = [vocab[w] for w in words]
        padded, keep = prefix_inputs(doc, model.cfg["enc_length"], pad=True,
                                     pad_token_id=vocab["[PAD]"])
        seq = padded + toks[len(doc):]
        st = ref.new_state()
        theirs = ref.prefill(padded, st, "prefix", keep)
        theirs = torch.cat([theirs, torch.cat([ref.step(t, st)[None] for t in toks[len(doc):]])])
        keep_t = torch.tensor([keep + [True] * (len(seq) - len(keep))], dtype=torch.float32)
        ours, _ = model(torch.tensor([seq]), None, keep=keep_t, enc=model.cfg["enc_length"])
        diff = (ours[0].double() - theirs[:, : ours.shape[-1]]).abs().max().item()
        result["prefix_max_abs_diff"] = diff
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=["based", "jrt", "mamba2", "llama", "nemotron_h"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=288, help="TBTT segment length")
    ap.add_argument("--doc-len", type=int, default=128, help="the training length (document words)")
    ap.add_argument("--max-facts", type=int, default=24)
    ap.add_argument("--d-state", type=int, default=32, help="Mamba-2 state size per head channel")
    ap.add_argument("--feature-dim", type=int, default=16, help="Based/JRT feature dimension")
    ap.add_argument("--window-size", type=int, default=64,
                    help="Based/JRT sliding-window layer: window_size (it keeps window_size/2 tokens)")
    ap.add_argument("--layers", type=int, default=4, help="Llama layers")
    ap.add_argument("--heads", type=int, default=4, help="Llama / Nemotron-H attention heads")
    ap.add_argument("--kv-heads", type=int, default=1, help="Nemotron-H KV heads")
    ap.add_argument("--pattern", default="M*M-",
                    help="Nemotron-H hybrid_override_pattern (M Mamba-2, * attention, - MLP)")
    ap.add_argument("--rope-theta", type=float, default=10000.0, help="Llama RoPE base")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--state-passing", action="store_true")
    ap.add_argument("--reset-prob", type=float, default=0.1)
    ap.add_argument("--tbptt", type=int, default=0, help="segments per TBTT batch (0 = off)")
    ap.add_argument("--tbptt-every", type=int, default=4, help="one TBTT batch every N steps")
    ap.add_argument("--formats", default="", help="comma list fmt:weight (default per arch)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=15.0, help="stop early past this wall time")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--init-from", default="", help="warm start from a model directory")
    ap.add_argument("--start-level", type=float, default=0.0, help="initial curriculum level (0..1)")
    ap.add_argument("--ramp-steps", type=int, default=1800,
                    help="gated steps from the easiest to the full curriculum")
    ap.add_argument("--curriculum-loss", type=float, default=1.0,
                    help="answer-loss EMA below which the curriculum advances")
    ap.add_argument("--lm-loss", type=float, default=0.0,
                    help="weight of the next-token loss on every position (0 = answers only)")
    ap.add_argument("--early-answer", type=float, default=0.0,
                    help="weight of the early-answer loss (question before a reading)")
    ap.add_argument("--hold-question", type=float, default=0.0,
                    help="weight of the held-question loss (the asked key before its fact)")
    args = ap.parse_args()
    if args.hold_question > 0 and args.early_answer <= 0:
        ap.error("--hold-question is a share of the --early-answer loss: set --early-answer too")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    vocab = task.token_ids()
    cfg = make_config(args.arch, len(vocab), args.doc_len, vocab["[PAD]"],
                      d_state=args.d_state, feature_dim=args.feature_dim,
                      layers=args.layers, heads=args.heads,
                      rope_theta=args.rope_theta, pattern=args.pattern,
                      kv_heads=args.kv_heads, window_size=args.window_size)
    model = build_model(args.arch, cfg, args.seed)
    if args.init_from:
        init_from(model, args.init_from)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.arch}: {n_params} parameters ({n_params * 4 / 1e6:.2f} MB f32)", flush=True)

    if args.formats:
        fmts = [(f.split(":")[0], float(f.split(":")[1])) for f in args.formats.split(",")]
    elif args.arch == "jrt":
        fmts = [("prefix", 0.5), ("default", 0.2), ("read_twice", 0.15), ("read_twice_full", 0.15)]
    else:
        fmts = [("default", 0.5), ("read_twice", 0.3), ("read_twice_full", 0.2)]
    names, weights = zip(*fmts)

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    warm = max(1, args.steps // 20)

    def lr_at(s):
        # Warmup, then cosine to 10 % over the run; the run's progress is
        # the larger of steps done and wall time used (--max-minutes), so a
        # run cut by the time cap still ends with a decayed learning rate.
        if s < warm:
            return args.lr * (s + 1) / warm
        p = max((s - warm) / max(1, args.steps - warm),
                (time.time() - started) / (60 * args.max_minutes))
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    state = None
    level = args.start_level
    args.cur_doc_len = 32
    started = time.time()
    ema = None
    early_ema = None  # the early-answer loss, when --early-answer is on
    step = 0
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        # Curriculum: documents start short with few facts; the level rises
        # (over at least --ramp-steps steps) only while the answer loss is
        # below --curriculum-loss, so recall is learnt on easy documents first.
        if ema is not None and ema < args.curriculum_loss:
            level = min(1.0, level + 1.0 / args.ramp_steps)
        max_facts = max(4, int(round(4 + level * (args.max_facts - 4))))
        args.cur_doc_len = int(round(32 + level * (args.doc_len - 32)))
        if args.tbptt and step % args.tbptt_every == args.tbptt_every - 1:
            segs = tbptt_batch(rng, args, vocab, max_facts)
            st = None
            loss_sum = 0.0
            opt.zero_grad()
            for toks, mask in segs:
                logits, st = model(toks, st, want_state=True)
                loss = answer_loss(logits, toks, mask)
                if mask.sum() > 0:
                    loss.backward()
                    loss_sum += loss.item()
                st = detach_state(st, None)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            lv = loss_sum
        else:
            fmt = rng.choices(names, weights)[0]
            toks, mask, early_target, early_weight = batch(rng, fmt, args, vocab, max_facts)
            opt.zero_grad()
            if fmt == "prefix":
                m = args.cur_doc_len  # every row is left-padded to it
                keep = (toks != vocab["[PAD]"]).float()
                keep[:, m:] = 1.0
                corrupted, target = mlm_corrupt(rng, toks, m, vocab)
                logits, _ = model(corrupted, None, keep=keep, enc=m)
                loss = answer_loss(logits, toks, mask)
                lp = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), toks.reshape(-1), reduction="none")
                mlm = (lp * target.reshape(-1)).sum() / target.sum().clamp(min=1)
                total = loss + 0.5 * mlm
            elif fmt == "prefix_with_question":
                # Rows are left-padded to cur_doc_len + 6 (the preamble); the
                # encoder covers at most the model's M = doc_len of them, as
                # when serving. No MLM: a masked question key would teach
                # nothing about reading for the question.
                m = min(args.cur_doc_len + 6, args.doc_len)
                keep = (toks != vocab["[PAD]"]).float()
                keep[:, m:] = 1.0
                logits, _ = model(toks, None, keep=keep, enc=m)
                loss = answer_loss(logits, toks, mask)
                total = loss
            else:
                carry = state if args.state_passing else None
                logits, new_state = model(toks, carry, want_state=args.state_passing)
                loss = answer_loss(logits, toks, mask)
                total = loss
                if args.lm_loss > 0:
                    total = total + args.lm_loss * sequence_loss(logits, toks, vocab["[PAD]"])
                if args.early_answer > 0 and early_weight.sum() > 0:
                    early = early_answer_loss(logits, early_target, early_weight)
                    total = total + args.early_answer * early
                    early_ema = early.item() if early_ema is None else 0.95 * early_ema + 0.05 * early.item()
                if args.state_passing:
                    reset = torch.rand(args.batch, generator=torch.Generator().manual_seed(args.seed * 100003 + step)) < args.reset_prob
                    state = detach_state(new_state, reset)
            total.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            lv = loss.item()
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        if step % args.log_every == 0 or step == args.steps - 1:
            el = time.time() - started
            extra = f" early {early_ema:.3f}" if early_ema is not None else ""
            print(f"step {step} loss {lv:.3f} ema {ema:.3f}{extra} facts<={max_facts} doc<={args.cur_doc_len} lr {lr_at(step):.2e} {el:.0f}s", flush=True)
        if time.time() - started > args.max_minutes * 60:
            print(f"stopping at step {step}: wall-time cap {args.max_minutes} min", flush=True)
            break
    minutes = (time.time() - started) / 60

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(args.out, "model.safetensors"), model.tensors(),
                      {"format": "pt"})
    task.write_tokenizer(os.path.join(args.out, "tokenizer.json"))
    ref = check_against_reference(args.out, args.arch, model, vocab)
    acc = quick_eval(model, args.arch, args, vocab)
    summary = {
        "arch": args.arch, "seed": args.seed, "steps": step + 1, "minutes": round(minutes, 1),
        "final_loss_ema": round(ema, 4), "params": n_params,
        "command": "/usr/bin/python3 tools/train/train.py " + " ".join(sys.argv[1:]),
        "reference_check": ref, "quick_eval": acc,
    }
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1), flush=True)


if __name__ == "__main__":
    main()
