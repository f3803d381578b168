@echo off
rem Shell completion for `kubectl appupdate` on Windows (kubectl >= 1.26). kubectl runs this
rem file, found on PATH by its name, with the words typed after `appupdate`; kubectl-appupdate
rem answers with the __complete protocol. Keep it next to kubectl-appupdate.exe (see the README).
if exist "%~dp0kubectl-appupdate.exe" (
  "%~dp0kubectl-appupdate.exe" __complete %*
) else (
  kubectl-appupdate.exe __complete %*
)
