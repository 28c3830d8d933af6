//! The tiny model as a Hugging Face checkpoint directory: config.json, tokenizer.json,
//! tokenizer_config.json and safetensors weights, single-file or sharded.

use std::collections::HashMap;
use std::path::Path;

use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, DecoderWrapper, PreTokenizerWrapper};

use super::{TinyModel, BOS, CHATML_TEMPLATE, IM_END};

impl TinyModel {
    pub fn hf_config(&self) -> serde_json::Value {
        let s = &self.spec;
        serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size(),
            "hidden_size": s.hidden,
            "intermediate_size": s.ffn,
            "num_hidden_layers": s.n_layers,
            "num_attention_heads": s.n_heads,
            "num_key_value_heads": s.n_kv_heads,
            "head_dim": s.head_dim,
            "rms_norm_eps": s.rms_eps as f64,
            "rope_theta": s.rope_theta as f64,
            "max_position_embeddings": s.context,
            "tie_word_embeddings": s.tied,
            "torch_dtype": "float32",
            "bos_token_id": self.bos_id,
            "eos_token_id": self.eos_id,
            "hidden_act": "silu"
        })
    }

    pub fn hf_tokenizer_config(&self) -> serde_json::Value {
        serde_json::json!({
            "bos_token": BOS,
            "eos_token": {"content": IM_END, "special": true},
            "add_bos_token": false,
            "chat_template": CHATML_TEMPLATE,
            "model_max_length": self.spec.context,
        })
    }

    /// Tensors under their Hugging Face names, in HF layout.
    pub fn hf_tensors(&self) -> Vec<(String, Vec<usize>, Vec<f32>)> {
        self.tensors.iter().map(|t| (hf_name(&t.name), t.dims.clone(), t.data.clone())).collect()
    }

    /// A byte-level BPE tokenizer equivalent to what kvengine builds from the GGUF metadata.
    pub fn hf_tokenizer(&self) -> tokenizers::Tokenizer {
        let vocab: tokenizers::models::bpe::Vocab = self.tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let bpe = BPE::builder().vocab_and_merges(vocab, self.merges.clone()).build().unwrap();
        let mut tok = tokenizers::Tokenizer::new(bpe);
        tok.with_pre_tokenizer(Some(PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true))));
        tok.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::default())));
        let specials: Vec<AddedToken> =
            self.tokens.iter().zip(&self.token_types).filter(|(_, &ty)| ty == 3).map(|(t, _)| AddedToken::from(t.clone(), true)).collect();
        tok.add_special_tokens(specials).unwrap();
        tok
    }

    /// config.json, tokenizer.json, tokenizer_config.json (everything but the weights).
    pub fn write_hf_side_files(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        write_json(&dir.join("config.json"), &self.hf_config());
        write_json(&dir.join("tokenizer_config.json"), &self.hf_tokenizer_config());
        self.hf_tokenizer().save(dir.join("tokenizer.json"), true).unwrap();
    }

    /// A single-file checkpoint: `model.safetensors`.
    pub fn write_hf_dir(&self, dir: &Path) {
        self.write_hf_side_files(dir);
        write_safetensors(&dir.join("model.safetensors"), &self.hf_tensors());
    }

    /// A sharded checkpoint: `model-0000i-of-0000n.safetensors` plus
    /// `model.safetensors.index.json`, tensors dealt round-robin so every shard holds some of
    /// each kind.
    pub fn write_hf_sharded(&self, dir: &Path, n_shards: usize) {
        self.write_hf_side_files(dir);
        let all = self.hf_tensors();
        let mut weight_map = serde_json::Map::new();
        let mut total = 0usize;
        for shard in 0..n_shards {
            let name = format!("model-{:05}-of-{:05}.safetensors", shard + 1, n_shards);
            let part: Vec<_> = all.iter().enumerate().filter(|(i, _)| i % n_shards == shard).map(|(_, t)| t.clone()).collect();
            for (tname, _, data) in &part {
                weight_map.insert(tname.clone(), serde_json::Value::String(name.clone()));
                total += data.len() * 4;
            }
            write_safetensors(&dir.join(&name), &part);
        }
        let index = serde_json::json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
        write_json(&dir.join("model.safetensors.index.json"), &index);
    }
}

/// GGUF tensor names to Hugging Face Llama/Qwen names (weights, biases, Qwen3's QK norms).
pub fn hf_name(gguf: &str) -> String {
    match gguf {
        "token_embd.weight" => return "model.embed_tokens.weight".into(),
        "output_norm.weight" => return "model.norm.weight".into(),
        "output.weight" => return "lm_head.weight".into(),
        _ => {}
    }
    let rest = gguf.strip_prefix("blk.").expect("block tensor");
    let (layer, tail) = rest.split_once('.').unwrap();
    let (module, kind) = tail.rsplit_once('.').unwrap();
    let hf = match module {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        other => panic!("unknown module {other}"),
    };
    format!("model.layers.{layer}.{hf}.{kind}")
}

pub fn write_safetensors(path: &Path, tensors: &[(String, Vec<usize>, Vec<f32>)]) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(n, dims, data)| (n.clone(), dims.clone(), data.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(n, dims, b)| (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, dims.clone(), b).unwrap()))
        .collect();
    let mut info = HashMap::new();
    info.insert("format".to_string(), "pt".to_string());
    safetensors::serialize_to_file(views, Some(info), path).unwrap();
}

pub fn write_json(path: &Path, v: &serde_json::Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}
