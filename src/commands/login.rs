//! `crush login [NAME] [--token-stdin]` and `crush logout NAME` (crush(1) LOGIN).

use crate::app::AppError;
use crate::login::{self, LoginError, Origin, Settings, Token, store};
use std::io::Read;

impl From<LoginError> for AppError {
    fn from(e: LoginError) -> Self {
        match e {
            LoginError::Unknown(_) | LoginError::Input(_) => AppError::Usage(e.to_string()),
            e => AppError::Runtime(e.to_string()),
        }
    }
}

fn known(name: &str) -> Result<(), LoginError> {
    if login::PROVIDERS.contains(&name) {
        Ok(())
    } else {
        Err(LoginError::Unknown(name.to_string()))
    }
}

/// Signs in to `name`: the device flow on the terminal, or (`token_stdin`) the token read from
/// standard input, stored as given and checked at first use.
pub(crate) fn login(name: &str, token_stdin: bool) -> Result<String, AppError> {
    known(name)?;
    let token = if token_stdin {
        let mut text = String::new();
        std::io::stdin()
            .take(64 * 1024)
            .read_to_string(&mut text)
            .map_err(|e| LoginError::Input(format!("cannot read the token from stdin: {e}")))?;
        let t = text.trim();
        if t.is_empty() || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(LoginError::Input(
                "--token-stdin: standard input holds no token (one line, no spaces)".into(),
            )
            .into());
        }
        Token {
            refresh_token: t.to_string(),
            ..Token::default()
        }
    } else {
        let s = Settings::load();
        let mut err = std::io::stderr();
        match name {
            "copilot" => login::flow::copilot_device(&s, &mut err)?,
            _ => login::flow::hyper_device(&s, &mut err)?,
        }
    };
    store::save(name, &token)?;
    Ok(format!(
        "Signed in to {name}; the token is in {}",
        store::path(name).display()
    ))
}

pub(crate) fn logout(name: &str) -> Result<String, AppError> {
    known(name)?;
    Ok(if store::remove(name)? {
        format!("Signed out of {name}")
    } else {
        format!("Not signed in to {name}")
    })
}

/// The providers one can sign in to, and their state.
pub(crate) fn list() -> Result<String, AppError> {
    let mut out = String::new();
    for name in login::PROVIDERS {
        let state = match login::Credential::find(name, None) {
            Ok(Some(c)) => match c.origin {
                Origin::Store => format!("signed in ({})", store::path(name).display()),
                Origin::Editor(p) => {
                    format!("signed in with Copilot's editor plugin ({})", p.display())
                }
                Origin::Config => "signed in (providers.oauth)".to_string(),
            },
            Ok(None) => format!("not signed in (crush login {name})"),
            Err(e) => format!("unusable: {e}"),
        };
        out.push_str(&format!("{name}\t{state}\n"));
    }
    Ok(out.trim_end().to_string())
}
