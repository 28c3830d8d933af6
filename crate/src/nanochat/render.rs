//! nanochat's chat format (upstream `render_conversation` / `render_for_completion`): token ids
//! plus a mask that is 1 on the tokens the assistant is trained to produce.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: Content,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    /// Assistant turns only: text, python tool calls and their outputs.
    Parts(Vec<Part>),
}

#[derive(Debug, Clone, Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

struct Rendered<'t> {
    tok: &'t Tokenizer,
    ids: Vec<u32>,
    mask: Vec<u8>,
}

impl Rendered<'_> {
    fn special(&mut self, name: &str, mask: u8) -> Result<()> {
        let id = self
            .tok
            .special_token(name)
            .ok_or_else(|| Error::unsupported(format!("this tokenizer has no {name} token; it is not a nanochat tokenizer")))?;
        self.ids.push(id);
        self.mask.push(mask);
        Ok(())
    }
    fn text(&mut self, text: &str, mask: u8) -> Result<()> {
        let ids = self.tok.encode(text, false, false)?;
        self.mask.extend(std::iter::repeat_n(mask, ids.len()));
        self.ids.extend(ids);
        Ok(())
    }
    fn wrapped(&mut self, open: &str, text: &str, close: &str, mask: u8) -> Result<()> {
        self.special(open, mask)?;
        self.text(text, mask)?;
        self.special(close, mask)
    }
}

/// `(ids, mask)` truncated to `max_tokens`. A leading system message is merged into the first
/// user turn; roles must then alternate user, assistant, … . User content is plain text.
pub fn render_conversation(tok: &Tokenizer, messages: &[Message], max_tokens: usize) -> Result<(Vec<u32>, Vec<u8>)> {
    let merged;
    let messages = match messages {
        [system, user, rest @ ..] if system.role == "system" => {
            let (Content::Text(s), Content::Text(u)) = (&system.content, &user.content) else {
                return Err(Error::invalid("system and user messages must be plain text"));
            };
            if user.role != "user" {
                return Err(Error::invalid("a system message must be followed by a user message"));
            }
            merged = [vec![Message { role: "user".into(), content: Content::Text(format!("{s}\n\n{u}")) }], rest.to_vec()].concat();
            &merged[..]
        }
        [system] if system.role == "system" => return Err(Error::invalid("a system message must be followed by a user message")),
        _ => messages,
    };
    if messages.is_empty() {
        return Err(Error::invalid("a conversation needs at least one message"));
    }
    let mut r = Rendered { tok, ids: Vec::new(), mask: Vec::new() };
    r.special("<|bos|>", 0)?;
    for (i, m) in messages.iter().enumerate() {
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if m.role != expected {
            return Err(Error::invalid(format!("message {i} is from '{}' but should be from '{expected}'", m.role)));
        }
        match (&m.content, expected) {
            (Content::Text(text), "user") => r.wrapped("<|user_start|>", text, "<|user_end|>", 0)?,
            (Content::Parts(_), "user") => return Err(Error::invalid("user messages must be plain text")),
            (content, _) => {
                r.special("<|assistant_start|>", 0)?;
                match content {
                    Content::Text(text) => r.text(text, 1)?,
                    Content::Parts(parts) => parts.iter().try_for_each(|p| render_part(&mut r, p))?,
                }
                r.special("<|assistant_end|>", 1)?;
            }
        }
    }
    r.ids.truncate(max_tokens);
    r.mask.truncate(max_tokens);
    Ok((r.ids, r.mask))
}

fn render_part(r: &mut Rendered, part: &Part) -> Result<()> {
    match part.kind.as_str() {
        "text" => r.text(&part.text, 1),
        "python" => r.wrapped("<|python_start|>", &part.text, "<|python_end|>", 1),
        // Tool output comes from the tool at run time, so the model is never trained on it.
        "python_output" => r.wrapped("<|output_start|>", &part.text, "<|output_end|>", 0),
        other => Err(Error::invalid(format!("unknown message part type '{other}' (expected text, python or python_output)"))),
    }
}

/// The conversation without its final assistant message, rendered (at most 2048 tokens, as
/// upstream) and followed by `<|assistant_start|>`: the prompt for the assistant's reply.
pub fn render_for_completion(tok: &Tokenizer, messages: &[Message]) -> Result<Vec<u32>> {
    let Some((_, rest)) = messages.split_last().filter(|(m, _)| m.role == "assistant") else {
        return Err(Error::invalid("the last message must be from the assistant"));
    };
    let (mut ids, _) = render_conversation(tok, rest, 2048)?;
    let mut r = Rendered { tok, ids: Vec::new(), mask: Vec::new() };
    r.special("<|assistant_start|>", 0)?;
    ids.extend(r.ids);
    Ok(ids)
}
