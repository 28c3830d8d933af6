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
        env.add_template_owned("chat", source.to_owned())
            .or_kind(ErrorKind::CorruptFile, "the model's chat template does not parse")?;
        Ok(Self { env, bos_token, eos_token })
    }

    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        for m in messages {
            if !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool") {
                return Err(Error::invalid(format!(
                    "message role '{}' is not one of system, user, assistant, tool",
                    m.role
                )));
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
