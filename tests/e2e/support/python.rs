//! The official Python MCP SDK, for tests that check our doors with
//! another implementation of the protocol than our own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// A venv with the official Python MCP SDK (2.3 or newer: both protocol
/// eras); its Python.
pub fn python_sdk() -> Result<PathBuf, String> {
    Ok(venv_with("py-mcp-sdk", "mcp>=2.3,<3")?.join("bin/python"))
}

/// A venv named `name` with `requirement` installed from PyPI, made once
/// per target dir (by one test at a time: the others wait for it), kept
/// for as long as `requirement` stays the same; its directory.
pub fn venv_with(name: &str, requirement: &str) -> Result<PathBuf, String> {
    static MAKING: Mutex<()> = Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let ready = venv.join("installed");
    if std::fs::read_to_string(&ready).is_ok_and(|r| r == requirement) {
        return Ok(venv);
    }
    let made = Command::new("python3").args(["-m", "venv"]).arg(&venv).output().map_err(|e| format!("python3: {e}"))?;
    if !made.status.success() {
        return Err(format!("python3 -m venv failed: {}", String::from_utf8_lossy(&made.stderr)));
    }
    let pip = Command::new(venv.join("bin/pip")).args(["install", "-q", "--upgrade", requirement]).output();
    let pip = pip.map_err(|e| format!("pip: {e}"))?;
    if !pip.status.success() {
        return Err(format!(
            "pip install {requirement} failed (no network?): {}",
            String::from_utf8_lossy(&pip.stderr)
        ));
    }
    std::fs::write(&ready, requirement).map_err(|e| e.to_string())?;
    Ok(venv)
}
