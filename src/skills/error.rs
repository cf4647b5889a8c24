//! Why a skill or command file is rejected, or a `/NAME` line cannot be sent (crush(1) SKILLS
//! AND COMMANDS).

use super::frontmatter::FrontmatterError;
use crate::config::commands::CommandError;
use std::fmt;

#[derive(Debug)]
pub(crate) enum SkillError {
    /// The file's frontmatter does not parse (the message names its line).
    Frontmatter(FrontmatterError),
    /// A field of the frontmatter, or the file's name, that does not fit; says which.
    Invalid(String),
    /// The arguments typed after `/NAME` do not split into words.
    Words(CommandError),
    /// The words after `/NAME` do not fit it (too many, ambiguous, missing); says what to type.
    Usage(String),
    /// An MCP prompt that gave no text; says why.
    Prompt(String),
    /// An MCP prompt that could not be fetched.
    Mcp(crate::mcp::McpError),
}

impl fmt::Display for SkillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkillError::Frontmatter(e) => e.fmt(f),
            SkillError::Invalid(m) | SkillError::Usage(m) | SkillError::Prompt(m) => f.write_str(m),
            SkillError::Words(e) => e.fmt(f),
            SkillError::Mcp(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SkillError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SkillError::Frontmatter(e) => Some(e),
            SkillError::Words(e) => Some(e),
            SkillError::Mcp(e) => Some(e),
            SkillError::Invalid(_) | SkillError::Usage(_) | SkillError::Prompt(_) => None,
        }
    }
}

impl SkillError {
    /// Whether the words typed are at fault (a usage error) rather than the prompt's server.
    pub(crate) fn is_usage(&self) -> bool {
        !matches!(self, SkillError::Prompt(_) | SkillError::Mcp(_))
    }
}

impl From<FrontmatterError> for SkillError {
    fn from(e: FrontmatterError) -> Self {
        SkillError::Frontmatter(e)
    }
}

impl From<crate::mcp::McpError> for SkillError {
    fn from(e: crate::mcp::McpError) -> Self {
        SkillError::Mcp(e)
    }
}
