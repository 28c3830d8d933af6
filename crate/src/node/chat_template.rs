use napi_derive::napi;

use super::{guarded, Result};
use crate::chat_template::{ChatMessage, ChatTemplate};
use crate::error::Error;

/// A chat template ready to render: a model's own, or one given in its place.
#[napi]
pub struct NativeChatTemplate {
    template: ChatTemplate,
}

impl NativeChatTemplate {
    pub(super) fn new(template: ChatTemplate) -> Self {
        Self { template }
    }
}

#[napi]
impl NativeChatTemplate {
    /// `messagesJson`: Hugging Face's messages (role, content, and optionally tool_calls,
    /// tool_call_id, name); `toolsJson`: OpenAI's function list, or none. JSON text, because
    /// arguments and schemas are arbitrary JSON that templates walk.
    #[napi]
    pub fn render(&self, messages_json: String, add_generation_prompt: bool, tools_json: Option<String>) -> Result<String> {
        guarded(|| {
            let messages: Vec<ChatMessage> = serde_json::from_str(&messages_json)
                .map_err(|e| Error::invalid(format!("messages are not in the chat message shape: {e}")))?;
            let tools: Option<serde_json::Value> =
                tools_json.map(|t| serde_json::from_str(&t)).transpose().map_err(|e| Error::invalid(format!("tools are not JSON: {e}")))?;
            self.template.render(&messages, add_generation_prompt, tools.as_ref())
        })
    }

    /// "hermes" or "llama3" where the template renders tools and teaches that call format.
    #[napi(getter)]
    pub fn tool_format(&self) -> Option<String> {
        self.template.tool_format().map(|f| f.as_str().to_owned())
    }
}
