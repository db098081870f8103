"""Reference answers for the model-family zoo, computed from the same weights without vLLM.

Run with the fixture venv's python (transformers, torch): the contract tests send the SDK's call through a
real vLLM server and compare its answer with what this script computes from the model directory.

    <cache>/venv/bin/python server-fixtures/references.py FAMILY MODEL_DIR < request.json > answer.json

FAMILY is a function below (``jina-listwise`` -> ``jina_listwise``); the request and answer are JSON (a list
of requests gets the list of their answers: one process, the model loaded once per request).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: jina-reranker-v3's prompt (its modeling.py ``format_docs_prompts_func``): the documents, each followed by
#: the document embedding token, then the query followed by the query embedding token, in one chat turn.
JINA_SYSTEM = (
    "You are a search relevance expert who can determine a ranking of the passages based on how relevant "
    "they are to the query. If the query is a question, how relevant a passage is depends on how well it "
    "answers the question. If not, try to analyze the intent of the query and assess how well each passage "
    "satisfies the intent. If an instruction is provided, you should follow the instruction when determining "
    "the ranking."
)
JINA_DOC_TOKEN = "<|embed_token|>"
JINA_QUERY_TOKEN = "<|rerank_token|>"


def jina_prompt(query: str, docs: list[str], instruction: str | None = None) -> str:
    """The one prompt jina-reranker-v3 reads for a query and its whole list of documents."""
    clean = [d.replace(JINA_DOC_TOKEN, "").replace(JINA_QUERY_TOKEN, "") for d in docs]
    query = query.replace(JINA_DOC_TOKEN, "").replace(JINA_QUERY_TOKEN, "")
    body = (
        f"I will provide you with {len(clean)} passages, each indicated by a numerical identifier. "
        f"Rank the passages based on their relevance to query: {query}\n"
    )
    if instruction:
        body += f"<instruct>\n{instruction}\n</instruct>\n"
    body += "\n".join(f'<passage id="{i}">\n{d}{JINA_DOC_TOKEN}\n</passage>' for i, d in enumerate(clean))
    body += f"\n<query>\n{query}{JINA_QUERY_TOKEN}\n</query>"
    return (
        f"<|im_start|>system\n{JINA_SYSTEM}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def jina_listwise(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"query", "documents", "instruction"?}`` -> ``{"scores": [...], "prompt_tokens": n}``: the cosine
    of each document's projected embedding with the query's, all read in one forward pass."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer, Qwen3Model

    config = AutoConfig.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    weights = {k: v.float() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    model = Qwen3Model(config).eval()
    model.load_state_dict({k.removeprefix("model."): v for k, v in weights.items() if k.startswith("model.")})
    projector = torch.nn.Sequential(
        torch.nn.Linear(config.hidden_size, config.hidden_size // 2, bias=False),
        torch.nn.ReLU(),
        torch.nn.Linear(config.hidden_size // 2, weights["projector.2.weight"].shape[0], bias=False),
    )
    projector[0].weight.data = weights["projector.0.weight"]
    projector[2].weight.data = weights["projector.2.weight"]
    prompt = jina_prompt(request["query"], request["documents"], request.get("instruction"))
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        hidden = model(input_ids=ids).last_hidden_state[0]
        tokens = ids[0]
        doc_rows = projector(hidden[tokens == tokenizer.convert_tokens_to_ids(JINA_DOC_TOKEN)])
        query_row = projector(hidden[tokens == tokenizer.convert_tokens_to_ids(JINA_QUERY_TOKEN)])[-1]
        scores = torch.nn.functional.cosine_similarity(query_row[None, :], doc_rows)
    return {"scores": scores.tolist(), "prompt_tokens": int(ids.shape[1])}


def qwen3_embedding(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts", "prompt_name"?, "prompt"?, "dimensions"?}`` -> ``{"vectors": [[...], ...]}``: what
    sentence-transformers encodes from the same directory (its last-token pooling, normalisation and
    prompts), in float32."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        str(model_dir),
        device="cpu",
        model_kwargs={"dtype": torch.float32},
        truncate_dim=request.get("dimensions"),
    )
    vectors = model.encode(
        request["texts"],
        prompt_name=request.get("prompt_name"),
        prompt=request.get("prompt"),
        normalize_embeddings=True,
        batch_size=1,  # one text per forward pass: no padding in the last-token pooling
    )
    return {"vectors": vectors.tolist()}


def token_embeddings(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts"}`` -> ``{"matrices": [[[...], ...], ...]}``: each text's per-token hidden states (after the
    final norm), what sentence-transformers' ``output_value="token_embeddings"`` gives, in float32."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu", model_kwargs={"dtype": torch.float32})
    matrices = model.encode(request["texts"], output_value="token_embeddings", batch_size=1)
    return {"matrices": [matrix.float().cpu().numpy().tolist() for matrix in matrices]}


def split_mean(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts", "window", "overlap"}`` -> ``{"token_ids": [[...]], "ranges": [[[a, b], ...]], "chunks":
    [[vector, ...]], "vectors": [...]}``: each text's tokens without special tokens (the model's own
    tokenizer), split into windows of ``window`` tokens starting every ``window - overlap`` tokens (the
    last one ending at the text's end); each window embedded by sentence-transformers as ``[CLS] window
    [SEP]`` (mean pooling, normalised), and the text's vector the token-count-weighted mean of its windows,
    normalised again."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu", model_kwargs={"dtype": torch.float32})
    tokenizer = model.tokenizer
    window, overlap = request["window"], request["overlap"]
    answer: dict[str, list[Any]] = {"token_ids": [], "ranges": [], "chunks": [], "vectors": []}
    for text in request["texts"]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        ranges, start = [], 0
        while True:
            ranges.append((start, min(start + window, len(ids))))
            if start + window >= len(ids):
                break
            start += window - overlap
        features = [
            {
                "input_ids": torch.tensor([[tokenizer.cls_token_id, *ids[a:b], tokenizer.sep_token_id]]),
                "attention_mask": torch.ones((1, b - a + 2), dtype=torch.long),
            }
            for a, b in ranges
        ]
        with torch.no_grad():
            chunks = np.stack([model(f)["sentence_embedding"][0].numpy() for f in features]).astype(
                np.float64
            )
        weights = np.array([b - a for a, b in ranges], np.float64)
        mean = (chunks * weights[:, None]).sum(axis=0) / weights.sum()
        answer["token_ids"].append(ids)
        answer["ranges"].append(ranges)
        answer["chunks"].append(chunks.tolist())
        answer["vectors"].append((mean / np.linalg.norm(mean)).tolist())
    return answer


def clip(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts", "images"}`` (image paths) -> ``{"texts": [...], "images": [...]}``: CLIP's normalised
    text and image features from the same weights with transformers (one input per forward pass)."""
    import torch
    from PIL import Image
    from transformers import CLIPModel, CLIPProcessor

    model = CLIPModel.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    processor = CLIPProcessor.from_pretrained(str(model_dir))

    def unit(features: Any) -> list[float]:
        tensor = features if isinstance(features, torch.Tensor) else features.pooler_output
        return torch.nn.functional.normalize(tensor, dim=-1)[0].tolist()

    with torch.no_grad():
        texts = [
            unit(model.get_text_features(**processor(text=[t], return_tensors="pt")))
            for t in request["texts"]
        ]
        images = [
            unit(
                model.get_image_features(
                    **processor(images=[Image.open(p).convert("RGB")], return_tensors="pt")
                )
            )
            for p in request["images"]
        ]
    return {"texts": texts, "images": images}


def colpali(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts", "images", "causal"}`` -> ``{"texts": [matrix, ...], "images": [matrix, ...]}``: ColPali's
    per-token vectors with transformers' ``ColPaliForRetrieval`` on the same weights, one input per forward
    pass, as vLLM builds the prompts: a text alone (no special tokens), an image as PaliGemma's processor
    renders an empty prompt (the image tokens, ``<bos>``, a newline). ``causal`` runs the Gemma decoder
    causally, as vLLM 0.32 does; otherwise it attends both ways over the prompt, as transformers (and
    colpali-engine) run PaliGemma's prefix."""
    import torch
    from PIL import Image
    from transformers import ColPaliConfig, ColPaliForRetrieval, PaliGemmaProcessor

    config = ColPaliConfig.from_pretrained(str(model_dir))
    if request.get("causal"):
        config.vlm_config.text_config.use_bidirectional_attention = False
    model = ColPaliForRetrieval.from_pretrained(str(model_dir), config=config, dtype=torch.float32).eval()
    processor = PaliGemmaProcessor.from_pretrained(str(model_dir), backend="pil")

    def vectors(inputs: Any) -> list[list[float]]:
        with torch.no_grad():
            return model(**inputs).embeddings[0].tolist()

    texts = [
        vectors(processor.tokenizer(t, add_special_tokens=False, return_tensors="pt"))
        for t in request["texts"]
    ]
    images = []
    for path in request["images"]:
        inputs = processor(images=[Image.open(path).convert("RGB")], text=[""], return_tensors="pt")
        images.append(vectors({k: inputs[k] for k in ("input_ids", "pixel_values", "attention_mask")}))
    return {"texts": texts, "images": images}


#: Qwen3-Reranker's prompt (its model card: ``format_instruction`` between the prefix and the suffix), the
#: text server-fixtures/templates/qwen3_reranker.jinja renders.
QWEN3_RERANKER_DEFAULT_INSTRUCTION = (
    "Given a web search query, retrieve relevant passages that answer the query"
)
QWEN3_RERANKER_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
QWEN3_RERANKER_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def qwen3_reranker_prompt(query: str, document: str, instruction: str | None = None) -> str:
    """The prompt Qwen3-Reranker reads for one (query, document) pair, as its model card builds it."""
    task = instruction or QWEN3_RERANKER_DEFAULT_INSTRUCTION
    body = f"<Instruct>: {task}\n<Query>: {query}\n<Document>: {document}"
    return QWEN3_RERANKER_PREFIX + body + QWEN3_RERANKER_SUFFIX


def qwen3_reranker(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"query", "documents", "instruction"?}`` -> ``{"scores": [...], "prompt_tokens": [...]}``: the model
    card's formula, P(yes) = softmax([logit_no, logit_yes])[1] at each pair's last token, with
    ``Qwen3ForCausalLM`` (the LM head tied to the embeddings)."""
    import torch
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = Qwen3ForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    no_id, yes_id = tokenizer.convert_tokens_to_ids(["no", "yes"])
    scores, lengths = [], []
    for document in request["documents"]:
        prompt = qwen3_reranker_prompt(request["query"], document, request.get("instruction"))
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            last = model(input_ids=ids).logits[0, -1]
        pair = torch.stack([last[no_id], last[yes_id]]).double()
        scores.append(float(torch.softmax(pair, dim=0)[1]))
        lengths.append(int(ids.shape[1]))
    return {"scores": scores, "prompt_tokens": lengths}


def reward(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"conversations": [[message, ...], ...]}`` -> ``{"rewards": [...], "token_ids": [[...], ...]}``: each
    conversation rendered by the tokenizer's chat template (no generation prompt, as vLLM's ``/pooling``
    defaults to) and scored by ``Qwen3ForSequenceClassification``: the score head's raw output at the last
    token."""
    import torch
    from transformers import AutoTokenizer, Qwen3ForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = Qwen3ForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()
    rewards, token_ids = [], []
    for conversation in request["conversations"]:
        ids = tokenizer.apply_chat_template(conversation, add_generation_prompt=False, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits
        rewards.append(float(logits[0, 0]))
        token_ids.append([int(i) for i in ids])
    return {"rewards": rewards, "token_ids": token_ids}


def token_reward(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"conversations": [...]}`` -> ``{"rewards": [[...], ...], "token_ids": [[...], ...]}``: each
    conversation rendered by the chat template (no generation prompt), run through transformers'
    ``Qwen2Model`` and Qwen2.5-Math-RM's score head (``Linear, ReLU, Linear``, read from the checkpoint's
    ``score.0``/``score.2`` tensors) at every token: one raw reward per token."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, Qwen2Model

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = Qwen2Model.from_pretrained(model_dir, dtype=torch.float32).eval()
    head = {
        k: v.float()
        for k, v in load_file(str(model_dir / "model.safetensors")).items()
        if k.startswith("score.")
    }
    rewards, token_ids = [], []
    for conversation in request["conversations"]:
        ids = tokenizer.apply_chat_template(conversation, add_generation_prompt=False, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        with torch.no_grad():
            hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
            inner = torch.relu(hidden @ head["score.0.weight"].T + head["score.0.bias"])
            out = inner @ head["score.2.weight"].T + head["score.2.bias"]
        rewards.append([float(x) for x in out[:, 0]])
        token_ids.append([int(i) for i in ids])
    return {"rewards": rewards, "token_ids": token_ids}


def splade(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts": [...]}`` -> ``{"indices": [[...]], "values": [[...]], "prompt_tokens": n}``: SPLADE's
    sparse vector of each text, as naver's SPLADE code computes it: the BERT encoder, the MLM head
    (dense, GELU, LayerNorm, decoder), then the maximum over the text's tokens ([CLS] and [SEP] included:
    the attention mask is all ones for one unpadded text) of log(1 + relu(logit)); the non-zero entries in
    token-id order. Every text is read alone (no padding)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer, BertModel

    config = AutoConfig.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    weights = {k: v.float() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    model = BertModel(config, add_pooling_layer=False).eval()
    model.load_state_dict({k.removeprefix("bert."): v for k, v in weights.items() if k.startswith("bert.")})
    head = "cls.predictions."
    indices: list[list[int]] = []
    values: list[list[float]] = []
    prompt_tokens = 0
    for text in request["texts"]:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        prompt_tokens += int(ids.shape[1])
        with torch.no_grad():
            hidden = model(input_ids=ids).last_hidden_state[0]
            x = torch.nn.functional.linear(
                hidden, weights[head + "transform.dense.weight"], weights[head + "transform.dense.bias"]
            )
            x = torch.nn.functional.gelu(x)
            x = torch.nn.functional.layer_norm(
                x,
                (config.hidden_size,),
                weights[head + "transform.LayerNorm.weight"],
                weights[head + "transform.LayerNorm.bias"],
                eps=config.layer_norm_eps,
            )
            logits = torch.nn.functional.linear(
                x, weights[head + "decoder.weight"], weights[head + "decoder.bias"]
            )
            pooled = torch.log1p(torch.relu(logits)).max(dim=0).values
        nonzero = torch.nonzero(pooled).flatten()
        indices.append([int(i) for i in nonzero])
        values.append([float(pooled[i]) for i in nonzero])
    return {"indices": indices, "values": values, "prompt_tokens": prompt_tokens}


def bge_m3_lexical(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts": [...]}`` -> ``{"indices": [[...]], "values": [[...]], "prompt_tokens": n}``: BGE-M3's
    lexical weights as FlagEmbedding computes them (``BGEM3FlagModel``: ``relu(sparse_linear(h))`` per token,
    then ``_process_token_weights``: the CLS, EOS, PAD and UNK ids left out, weights <= 0 left out, the
    largest weight kept for a repeated id), with transformers' XLM-R on the same weights; ids ascending."""
    import torch
    from transformers import AutoTokenizer, XLMRobertaModel

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = XLMRobertaModel.from_pretrained(model_dir, add_pooling_layer=False).eval()
    sparse = torch.load(model_dir / "sparse_linear.pt", map_location="cpu")
    unused = {tokenizer.cls_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id}
    indices: list[list[int]] = []
    values: list[list[float]] = []
    prompt_tokens = 0
    for text in request["texts"]:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        prompt_tokens += int(ids.shape[1])
        with torch.no_grad():
            hidden = model(input_ids=ids).last_hidden_state[0]
            weights = torch.relu(torch.nn.functional.linear(hidden, sparse["weight"], sparse["bias"]))[:, 0]
        lexical: dict[int, float] = {}
        for token_id, weight in zip(ids[0].tolist(), weights.tolist(), strict=True):
            if token_id not in unused and weight > 0:
                lexical[token_id] = max(lexical.get(token_id, 0.0), weight)
        indices.append(sorted(lexical))
        values.append([lexical[i] for i in sorted(lexical)])
    return {"indices": indices, "values": values, "prompt_tokens": prompt_tokens}


def bge_m3_colbert(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts": [...]}`` -> ``{"matrices": [[[...], ...], ...]}``: BGE-M3's multi-vector output as
    FlagEmbedding computes it (``BGEM3FlagModel._colbert_embedding``: ``colbert_linear`` on every hidden
    state but the first, then each row L2-normalised), with transformers' XLM-R on the same weights."""
    import torch
    from transformers import AutoTokenizer, XLMRobertaModel

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = XLMRobertaModel.from_pretrained(model_dir, add_pooling_layer=False).eval()
    colbert = torch.load(model_dir / "colbert_linear.pt", map_location="cpu")
    matrices = []
    for text in request["texts"]:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            hidden = model(input_ids=ids).last_hidden_state[0, 1:]
            vectors = torch.nn.functional.linear(hidden, colbert["weight"], colbert["bias"])
        matrices.append(torch.nn.functional.normalize(vectors, dim=-1).tolist())
    return {"matrices": matrices}


def voxtral(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"audio": [PATH, ...], "language": "en", "max_new_tokens": N}`` -> ``{"texts": [...], "token_ids":
    [[...], ...]}``: each recording transcribed by transformers' Voxtral on the same weights, greedy, the
    prompt from ``VoxtralProcessor.apply_transcription_request`` (mistral_common's transcription request,
    as vLLM builds it), the text decoded without special tokens."""
    import soundfile
    import torch
    from transformers import VoxtralForConditionalGeneration, VoxtralProcessor

    processor = VoxtralProcessor.from_pretrained(model_dir)
    model = VoxtralForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    texts, token_ids = [], []
    for path in request["audio"]:
        audio, rate = soundfile.read(path, dtype="float32")
        inputs = processor.apply_transcription_request(
            audio=audio,
            sampling_rate=rate,
            format="wav",
            language=request.get("language"),
            model_id=str(model_dir),
        )
        with torch.no_grad():
            out = model.generate(**inputs, do_sample=False, max_new_tokens=request["max_new_tokens"])
        ids = out[0, inputs["input_ids"].shape[1] :].tolist()
        token_ids.append(ids)
        texts.append(processor.tokenizer.decode(ids, skip_special_tokens=True))
    return {"texts": texts, "token_ids": token_ids}


def qwen3_asr(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"audio": path, "language"?: ISO code, "prompt"?: str, "max_new_tokens": n, "segment_seconds"?: s}``
    -> ``{"ids": [...], "text": str, "prompt_tokens": n}``: transformers' greedy generation on the recording,
    prompted as ``Qwen3ASRProcessor.apply_transcription_request`` prompts it (the language forced in the
    assistant turn, the prompt as a system turn); ``text`` decoded without special tokens.

    With ``segment_seconds``, vLLM's realtime session (``Qwen3ASRRealtimeGeneration``): the audio in pieces
    of that length, each a prompt without a language (``<|im_start|>user\\n<audio><|im_end|>\\n<|im_start|>
    assistant\\n``) answered with ``max_new_tokens``; each piece's prompt follows the whole context before it,
    in which the previous piece's answer lacks its last token (vLLM's scheduler keeps only the output tokens
    it has computed). ``ids`` and ``prompt_tokens`` are then per piece."""
    import soundfile as sf
    import torch
    from transformers import AutoProcessor, Qwen3ASRForConditionalGeneration

    processor = AutoProcessor.from_pretrained(model_dir)
    model = Qwen3ASRForConditionalGeneration.from_pretrained(model_dir).eval()
    audio, rate = sf.read(request["audio"], dtype="float32")
    n_new = request["max_new_tokens"]
    if "segment_seconds" not in request:
        inputs = processor.apply_transcription_request(
            audio=audio, language=request.get("language"), prompt=request.get("prompt")
        )
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=n_new, do_sample=False)
        n = inputs["input_ids"].shape[1]
        ids = out[0, n:].tolist()
        return {"ids": ids, "text": processor.decode(ids, skip_special_tokens=True), "prompt_tokens": n}
    step = int(request["segment_seconds"] * rate)
    pieces = [audio[i : i + step] for i in range(0, len(audio), step)]
    turns = [[{"role": "user", "content": [{"type": "audio", "audio": piece}]}] for piece in pieces]
    inputs = processor.apply_chat_template(
        turns, tokenize=True, return_dict=True, add_generation_prompt=True, padding=True
    )
    context: list[int] = []
    answers: list[list[int]] = []
    prompts: list[int] = []
    for i in range(len(pieces)):
        prompt = inputs["input_ids"][i][inputs["attention_mask"][i].bool()].tolist()
        context += (answers[-1][:-1] if answers else []) + prompt
        with torch.no_grad():
            out = model.generate(
                input_ids=torch.tensor([context]),
                attention_mask=torch.ones(1, len(context), dtype=torch.long),
                input_features=inputs["input_features"][: i + 1],
                input_features_mask=inputs["input_features_mask"][: i + 1],
                max_new_tokens=n_new,
                do_sample=False,
            )
        answers.append(out[0, len(context) :].tolist())
        prompts.append(len(prompt))
    text = processor.decode([t for answer in answers for t in answer], skip_special_tokens=True)
    return {"ids": answers, "text": text, "prompt_tokens": prompts}


def qwen3_aligner(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"audio": path, "text", "language"?}`` -> ``{"words": [{"text", "start_time", "end_time"}],
    "classes": [...], "prompt_tokens": n, "duration": s}``: transformers' forced alignment on the same
    weights (``Qwen3ASRForTokenClassification``): the words from ``split_words_for_alignment``, vLLM's
    prompt (audio placeholder, then each word and two ``<timestamp>``), the argmax class at each marker,
    and ``decode_forced_alignment``'s word times (seconds)."""
    import soundfile
    import torch
    from build_qwen3_aligner import TIMESTAMP_TOKEN_ID, transformers_model
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    model = transformers_model(model_dir)
    samples, rate = soundfile.read(request["audio"], dtype="float32")
    words = processor.split_words_for_alignment(request["text"], request.get("language"))
    prompt = "<|audio_start|><|audio_pad|><|audio_end|>" + "".join(
        f"{w}<timestamp><timestamp>" for w in words
    )
    inputs = processor(text=[prompt], audio=[samples], sampling_rate=rate)
    names = ("input_ids", "attention_mask", "input_features", "input_features_mask")
    with torch.no_grad():
        logits = model(**{k: v for k, v in inputs.items() if k in names}).logits
    ids = inputs["input_ids"]
    classes = logits.argmax(-1)[0][ids[0] == TIMESTAMP_TOKEN_ID].tolist()
    timed = processor.decode_forced_alignment(logits, ids, [words], TIMESTAMP_TOKEN_ID)[0]
    return {
        "words": timed,
        "classes": classes,
        "prompt_tokens": ids.shape[1],
        "duration": len(samples) / rate,
    }


def _instructed_transcription(
    processor: Any, model: Any, request: dict[str, Any], **audio_kwargs: Any
) -> dict[str, Any]:
    """Greedy ``generate`` on the prompt vLLM's Granite Speech and GLM-ASR ``get_generation_prompt`` write:
    one user turn, the audio token then "can you transcribe the speech into a written format?" or
    "translate the speech to <to_language>", through the chat template; ``text`` decoded without special
    tokens."""
    import soundfile as sf
    import torch

    audio, _ = sf.read(request["audio"], dtype="float32")
    if request["task"] == "translate":
        instruction = f"translate the speech to {request.get('to_language', '')}"
    else:
        instruction = "can you transcribe the speech into a written format?"
    chat = [{"role": "user", "content": processor.audio_token + instruction}]
    text = processor.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=text, audio=audio, return_tensors="pt", **audio_kwargs)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=request["max_new_tokens"], do_sample=False)
    n = inputs["input_ids"].shape[1]
    ids = out[0, n:].tolist()
    return {"ids": ids, "text": processor.tokenizer.decode(ids, skip_special_tokens=True), "prompt_tokens": n}


def granite_speech(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"audio": path, "task": "transcribe" | "translate", "to_language"?: name, "max_new_tokens": n}`` ->
    ``{"ids": [...], "text": str, "prompt_tokens": n}``: transformers' Granite Speech on the same weights
    (its feature extractor on the torchaudio stand-in, as the fixture's vLLM runs it), prompted as vLLM
    prompts it (``_instructed_transcription``)."""
    from build_granite_speech import use_torchaudio_standin

    use_torchaudio_standin()
    from transformers import AutoProcessor, GraniteSpeechForConditionalGeneration

    processor = AutoProcessor.from_pretrained(model_dir)
    model = GraniteSpeechForConditionalGeneration.from_pretrained(model_dir).eval()
    return _instructed_transcription(processor, model, request)


def glm_asr(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"audio": path, "task": "transcribe" | "translate", "to_language"?: name, "max_new_tokens": n}`` ->
    ``{"ids": [...], "text": str, "prompt_tokens": n}``: transformers' GLM-ASR on the same weights, prompted
    as vLLM prompts it (``_instructed_transcription``; ``apply_transcription_request`` writes another
    prompt)."""
    from transformers import AutoProcessor, GlmAsrForConditionalGeneration

    processor = AutoProcessor.from_pretrained(model_dir)
    model = GlmAsrForConditionalGeneration.from_pretrained(model_dir).eval()
    return _instructed_transcription(processor, model, request, sampling_rate=16000)


def sequence_classification(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts": [...]}`` -> ``{"scores": [{label: score, ...}, ...], "problem_type": str}``: transformers'
    ``pipeline("text-classification", top_k=None)``, which picks the activation from the config as vLLM
    does (sigmoid for ``problem_type: multi_label_classification`` or one label, else softmax)."""
    from transformers import pipeline

    classify = pipeline("text-classification", model=str(model_dir), top_k=None)
    answers = classify(request["texts"])
    return {
        "scores": [{item["label"]: float(item["score"]) for item in answer} for answer in answers],
        "problem_type": classify.model.config.problem_type,
    }


def token_classification(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"texts": [...], "aggregations": ["none", "simple", ...]}`` -> ``{strategy: [[entity, ...], ...]}``:
    transformers' ``pipeline("token-classification", aggregation_strategy=strategy)`` per text, each entity
    ``{"label", "score", "start", "end"}`` (``label``: the pipeline's ``entity_group``, or ``entity`` for
    ``none``)."""
    from transformers import pipeline

    ner = pipeline("token-classification", model=str(model_dir))
    return {
        strategy: [
            [
                {
                    "label": item.get("entity_group", item.get("entity")),
                    "score": float(item["score"]),
                    "start": int(item["start"]),
                    "end": int(item["end"]),
                }
                for item in ner(text, aggregation_strategy=strategy)
            ]
            for text in request["texts"]
        ]
        for strategy in request["aggregations"]
    }


def _vision_chat(model_cls: Any, model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"messages": [...], "max_new_tokens": n}`` -> ``{"prompt_ids": [...], "ids": [...], "text": str}``:
    transformers' greedy ``generate`` on the chat an OCR preset sends (the messages in OpenAI's shape, an
    image part written ``{"type": "image", "path": PNG}``), the prompt from the processor's
    ``apply_chat_template``, as vLLM renders and processes it; ``text`` decoded without special tokens."""
    import torch
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    model = model_cls.from_pretrained(model_dir, dtype=torch.float32).eval()
    messages = [
        {
            **message,
            "content": message["content"]
            if isinstance(message["content"], str)
            else [
                {"type": "image", "image": Image.open(part["path"]).convert("RGB")}
                if part["type"] == "image"
                else part
                for part in message["content"]
            ],
        }
        for message in request["messages"]
    ]
    inputs = processor.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=request["max_new_tokens"], do_sample=False)
    n = inputs["input_ids"].shape[1]
    ids = out[0, n:].tolist()
    return {
        "prompt_ids": inputs["input_ids"][0].tolist(),
        "ids": ids,
        "text": processor.decode(ids, skip_special_tokens=True),
    }


def qwen2_5_vl(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """An OCR preset's chat on transformers' Qwen2.5-VL (``_vision_chat``), its torchvision image processor
    on the pure torchvision the fixture's server runs."""
    from build_qwen2_5_vl import use_pure_torchvision

    use_pure_torchvision()
    from transformers import Qwen2_5_VLForConditionalGeneration

    return _vision_chat(Qwen2_5_VLForConditionalGeneration, model_dir, request)


def hunyuan_vl(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """An OCR preset's chat on transformers' HunYuanVL (HunyuanOCR; ``_vision_chat``), its torchvision image
    processor on the pure torchvision the fixture's server runs."""
    from build_qwen2_5_vl import use_pure_torchvision

    use_pure_torchvision()
    from transformers import HunYuanVLForConditionalGeneration

    return _vision_chat(HunYuanVLForConditionalGeneration, model_dir, request)


def qianfan_ocr(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """An OCR preset's chat on transformers' Qianfan-OCR (``_vision_chat``): its GotOcr2 image processor (one
    tile) on the pure torchvision."""
    from build_qwen2_5_vl import use_pure_torchvision

    use_pure_torchvision()
    from transformers import QianfanOCRForConditionalGeneration

    return _vision_chat(QianfanOCRForConditionalGeneration, model_dir, request)


def dots_ocr(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"image": path, "prompt": str, "max_new_tokens": n}`` -> ``{"prompt_ids": [...], "ids": [...],
    "text": str}``: dots.ocr's greedy answer on the same weights without vLLM. transformers 5.19 has no
    dots.ocr; dots' ``modeling_dots_ocr.py`` is transformers' ``Qwen2ForCausalLM`` whose input embeddings
    get the vision tower's rows at the image-pad tokens, which is what this runs, with
    ``build_dots_ocr.DotsVision`` (dots' ``modeling_dots_vision.py``, SDPA path, float32) as the tower. The
    prompt is dots' client's (``dots_ocr/model/inference.py``): the image placeholder, then the prompt, in
    the user turn of its chat template; the image through the ``Qwen2VLProcessor`` vLLM loads."""
    from build_dots_ocr import IMAGE_PLACEHOLDER, use_pure_torchvision, vision_tower

    use_pure_torchvision()
    import torch
    from PIL import Image
    from safetensors.torch import load_file
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2VLProcessor

    config = json.loads((model_dir / "config.json").read_text())
    weights = load_file(str(model_dir / "model.safetensors"))
    lm = Qwen2ForCausalLM(Qwen2Config.from_dict(config)).eval()
    lm.load_state_dict({k: v for k, v in weights.items() if not k.startswith("vision_tower.")})
    vision = vision_tower(config["vision_config"]).eval()
    prefix = "vision_tower."
    vision.load_state_dict({k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)})
    processor = Qwen2VLProcessor.from_pretrained(str(model_dir), trust_remote_code=True)
    chat = [{"role": "user", "content": IMAGE_PLACEHOLDER + request["prompt"]}]
    text = processor.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=[Image.open(request["image"]).convert("RGB")], return_tensors="pt")
    ids = inputs["input_ids"]
    with torch.no_grad():
        embeds = lm.get_input_embeddings()(ids)
        rows = vision(inputs["pixel_values"], inputs["image_grid_thw"].tolist())
        embeds[ids == config["image_token_id"]] = rows[:, : config["hidden_size"]]
        out = lm.generate(
            input_ids=ids,
            inputs_embeds=embeds,
            attention_mask=inputs["attention_mask"],
            max_new_tokens=request["max_new_tokens"],
            do_sample=False,
        )
    new = out[0, ids.shape[1] :].tolist()
    return {
        "prompt_ids": ids[0].tolist(),
        "ids": new,
        "text": processor.tokenizer.decode(new, skip_special_tokens=True),
    }


def deepseek_ocr2(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"image": path, "prompt": str, "max_new_tokens": n}`` -> ``{"prompt_ids": [...], "ids": [...],
    "text": str}``: transformers' ``DeepseekOcr2ForConditionalGeneration`` on build_deepseek_ocr2's
    real-size random weights (``model_dir/transformers``), greedy, float32, on the prompt vLLM's
    DeepSeek-OCR-2 processor writes for an image and a text (BOS, the image, a newline, the text), the image
    through transformers' ``DeepseekOcr2ImageProcessorPil`` and the served tokenizer (``model_dir/vllm``)."""
    import torch
    from PIL import Image
    from transformers import (
        AutoTokenizer,
        DeepseekOcr2ForConditionalGeneration,
        DeepseekOcr2ImageProcessorPil,
        DeepseekOcr2Processor,
    )

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir / "vllm"))
    processor = DeepseekOcr2Processor(image_processor=DeepseekOcr2ImageProcessorPil(), tokenizer=tokenizer)
    model = DeepseekOcr2ForConditionalGeneration.from_pretrained(
        str(model_dir / "transformers"), dtype=torch.float32
    ).eval()
    text = f"{tokenizer.bos_token}<image>\n{request['prompt']}"
    inputs = processor(images=[Image.open(request["image"]).convert("RGB")], text=text, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=request["max_new_tokens"], do_sample=False)
    n = inputs["input_ids"].shape[1]
    ids = out[0, n:].tolist()
    return {
        "prompt_ids": inputs["input_ids"][0].tolist(),
        "ids": ids,
        "text": tokenizer.decode(ids, skip_special_tokens=False),
    }


def ocr_chat(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"image": path, "text"?: prompt, "text_first"?: bool, "max_new_tokens": n, "torchvision"?: bool,
    "align_corners"?: bool, "model_class"?: name, "processor_class"?: name}`` ->
    ``{"prompt_ids": [...], "ids": [...], "text": str}``: transformers' greedy generation on one user turn of
    the image and the text (image first unless ``text_first``; the image alone without ``text``), through the
    model directory's processor and chat template (``AutoProcessor`` and ``AutoModelForImageTextToText``, or
    the transformers classes ``processor_class`` and ``model_class`` name), as an OCR model served on
    /v1/chat/completions reads it;
    ``text`` decoded without special tokens.

    ``torchvision``: PyPI's torchvision without its compiled parts (``fixture_table.pure_torchvision_dir``)
    on the path, so that the processor runs with the torchvision backend the server picks with it.
    ``align_corners``: how the vision tower resamples its learned position grid to the image's patch grid
    (``interpolation_align_corners`` of transformers' vision embeddings), where a model's release code and
    transformers disagree: transformers 5.19's PaddleOCR-VL says True, the release (Keye's
    ``SiglipVisionEmbeddings``) and vLLM 0.32 resample with ``align_corners=False``."""
    if request.get("torchvision"):
        from fixture_table import pure_torchvision_dir

        sys.path.insert(0, str(pure_torchvision_dir()))
    import torch
    import transformers
    from PIL import Image

    processor_class = getattr(transformers, request.get("processor_class", "AutoProcessor"))
    processor = processor_class.from_pretrained(model_dir)
    model_class = getattr(transformers, request.get("model_class", "AutoModelForImageTextToText"))
    model = model_class.from_pretrained(model_dir, dtype=torch.float32).eval()
    if "align_corners" in request:
        for module in model.modules():
            if hasattr(module, "interpolation_align_corners"):
                module.interpolation_align_corners = request["align_corners"]
    image = Image.open(request["image"]).convert("RGB")
    content: list[dict[str, Any]] = [{"type": "image", "image": image}]
    if request.get("text") is not None:
        text_part = {"type": "text", "text": request["text"]}
        content = [text_part, *content] if request.get("text_first") else [*content, text_part]
    inputs = processor.apply_chat_template(
        [{"role": "user", "content": content}],
        tokenize=True,
        add_generation_prompt=True,
        return_dict=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=request["max_new_tokens"])
    n = inputs["input_ids"].shape[1]
    ids = out[0, n:].tolist()
    return {
        "prompt_ids": inputs["input_ids"][0].tolist(),
        "ids": ids,
        "text": processor.decode(ids, skip_special_tokens=True),
    }


def main(argv: list[str]) -> int:
    family, model_dir = argv[1], Path(argv[2])
    compute = globals()[family.replace("-", "_")]
    request = json.load(sys.stdin)
    answer = (
        [compute(model_dir, one) for one in request]
        if isinstance(request, list)
        else compute(model_dir, request)
    )
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
