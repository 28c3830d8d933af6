//! The tiny model itself: its byte-level BPE vocabulary and its random weights, kept in Hugging
//! Face layout; `write_gguf` and `write_hf` turn it into files.

use super::Rng;

pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

pub const BOS: &str = "<|endoftext|>";
pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";

/// Prompts that exercise merges, bytes outside ASCII, and special tokens.
pub const PROMPTS: &[&str] = &[
    "Hello world, the cat sat on the mat.",
    "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n",
    "naïve café — 日本語 🙂 tabs\tand\nnewlines   spaces 12345",
    "the the the the other hello Hello HELLO",
];

#[derive(Debug, Clone)]
pub struct TinySpec {
    pub hidden: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub context: usize,
    pub rms_eps: f32,
    pub rope_theta: f32,
    /// No separate `output.weight` / `lm_head.weight`: the embedding doubles as the LM head.
    pub tied: bool,
}

impl Default for TinySpec {
    fn default() -> Self {
        Self {
            hidden: 64,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: 16,
            ffn: 128,
            context: 512,
            rms_eps: 1e-5,
            rope_theta: 10_000.0,
            tied: false,
        }
    }
}

/// One tensor under its GGUF name, in Hugging Face layout, row-major.
#[derive(Clone)]
pub struct RawTensor {
    pub name: String,
    pub dims: Vec<usize>,
    pub data: Vec<f32>,
}

pub struct TinyModel {
    pub spec: TinySpec,
    /// Token strings in id order (byte-level unicode spelling).
    pub tokens: Vec<String>,
    /// llama.cpp token types: 1 normal, 3 control.
    pub token_types: Vec<i32>,
    pub merges: Vec<(String, String)>,
    pub bos_id: u32,
    pub eos_id: u32,
    pub tensors: Vec<RawTensor>,
}

/// GPT-2's reversible byte → printable-unicode map (same as the tokenizers crate's).
pub fn bytes_to_unicode() -> Vec<char> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut next = 256u32;
    (0..=255u8)
        .map(|b| {
            if printable(b) {
                b as char
            } else {
                let c = char::from_u32(next).unwrap();
                next += 1;
                c
            }
        })
        .collect()
}

const MERGES: &[(&str, &str)] = &[
    ("h", "e"),
    ("l", "l"),
    ("Ġ", "t"),
    ("Ġt", "he"),
    ("o", "r"),
    ("Ġ", "w"),
    ("Ġw", "or"),
    ("a", "t"),
    ("Ġ", "s"),
    ("Ġs", "at"),
    ("Ġ", "c"),
    ("Ġc", "at"),
    ("i", "n"),
    ("Ġ", "a"),
    ("e", "r"),
    ("Ġ", "o"),
    ("Ġo", "n"),
    ("H", "e"),
    ("He", "ll"),
    ("Hell", "o"),
    ("Ġ", "m"),
    ("Ġm", "at"),
    ("Ġ", "Ġ"),
];

/// Byte symbols, then one token per merge, then the control tokens: (tokens, types, merges).
fn vocabulary() -> (Vec<String>, Vec<i32>, Vec<(String, String)>) {
    let mut tokens: Vec<String> = bytes_to_unicode().into_iter().map(|c| c.to_string()).collect();
    let mut token_types = vec![1i32; tokens.len()];
    let mut merges = Vec::new();
    for (a, b) in MERGES {
        merges.push((a.to_string(), b.to_string()));
        let merged = format!("{a}{b}");
        assert!(!tokens.contains(&merged), "duplicate merge result {merged}");
        tokens.push(merged);
        token_types.push(1);
    }
    for special in [BOS, IM_START, IM_END] {
        tokens.push(special.to_string());
        token_types.push(3);
    }
    (tokens, token_types, merges)
}

/// The draw order (all matrices, then all norms) is part of what a seed means: reordering it
/// would silently change every seeded model, and with it the fuzz bases.
fn random_weights(seed: u64, s: &TinySpec, vocab: usize) -> Vec<RawTensor> {
    let (h, qd, kvd, ff) = (s.hidden, s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim, s.ffn);
    let mut rng = Rng::new(seed);
    let mut mat = |name: String, rows: usize, cols: usize, scale: f32| RawTensor {
        name,
        dims: vec![rows, cols],
        data: (0..rows * cols).map(|_| rng.symmetric(scale)).collect(),
    };
    let mut tensors = vec![mat("token_embd.weight".into(), vocab, h, 0.5)];
    for l in 0..s.n_layers {
        let p = format!("blk.{l}");
        tensors.push(mat(format!("{p}.attn_q.weight"), qd, h, 0.35));
        tensors.push(mat(format!("{p}.attn_k.weight"), kvd, h, 0.35));
        tensors.push(mat(format!("{p}.attn_v.weight"), kvd, h, 0.3));
        tensors.push(mat(format!("{p}.attn_output.weight"), h, qd, 0.2));
        tensors.push(mat(format!("{p}.ffn_gate.weight"), ff, h, 0.25));
        tensors.push(mat(format!("{p}.ffn_up.weight"), ff, h, 0.25));
        tensors.push(mat(format!("{p}.ffn_down.weight"), h, ff, 0.15));
    }
    if !s.tied {
        tensors.push(mat("output.weight".into(), vocab, h, 0.3));
    }
    let mut norm = |name: String| RawTensor { name, dims: vec![h], data: (0..h).map(|_| 1.0 + rng.symmetric(0.2)).collect() };
    for l in 0..s.n_layers {
        tensors.push(norm(format!("blk.{l}.attn_norm.weight")));
        tensors.push(norm(format!("blk.{l}.ffn_norm.weight")));
    }
    tensors.push(norm("output_norm.weight".into()));
    tensors
}

impl TinyModel {
    pub fn new(seed: u64) -> Self {
        Self::with_spec(seed, TinySpec::default())
    }

    pub fn with_spec(seed: u64, spec: TinySpec) -> Self {
        let (tokens, token_types, merges) = vocabulary();
        let bos_id = tokens.iter().position(|t| t == BOS).unwrap() as u32;
        let eos_id = tokens.iter().position(|t| t == IM_END).unwrap() as u32;
        let tensors = random_weights(seed, &spec, tokens.len());
        Self { spec, tokens, token_types, merges, bos_id, eos_id, tensors }
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    pub fn tensor(&self, name: &str) -> &RawTensor {
        self.tensors.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no tensor {name}"))
    }
}
