// Secrets that must never leave the machine, for example in a support bundle:
// the credentials in gpudoctor's config, and credentials in free text (logs,
// command output). The two tables below are the whole rule; the functions
// apply it. A masked value reads "<redacted>"; what is not secret (a webhook's
// host, header names, an exec hook's program, every threshold) stays, so the
// setup can still be read.
//
//   std::string config = RedactConfigSecrets(file_text);  // TOML in, readable TOML out
//   std::string log = RedactTextSecrets(kernel_log);
#pragma once

#include <string>
#include <string_view>

namespace gpudoctor {

inline constexpr std::string_view kRedacted = "<redacted>";

enum class SecretMask {
  kWholeValue,  // the value, and every value below it, is masked
  kUrlOrigin,   // a URL keeps scheme, host and port; user-info, path, query and fragment are masked
  kArgvTail,    // an argument vector keeps its program; every argument after it is masked
};

struct ConfigSecret {
  std::string_view path;  // keys from the root, through arrays of tables; "*" is any one key
  SecretMask mask;
};

// Config values that are secret by where they stand. A webhook URL loses its
// path too: Slack-style webhook URLs carry the token there.
inline constexpr ConfigSecret kConfigSecrets[] = {
    {"alerts.webhook.url", SecretMask::kUrlOrigin},
    {"alerts.webhook.headers.*", SecretMask::kWholeValue},
    {"alerts.exec.argv", SecretMask::kArgvTail},
};

// A key whose name holds one of these (in any case) is secret wherever it
// stands: in the config its whole value is masked; in free text the value of
// `name=value`, `name: value` and `--name value` is (plain numbers excepted,
// so "startToken = 0x3" in a driver message stays readable).
inline constexpr std::string_view kSecretNameParts[] = {
    "password", "passwd", "passphrase", "pwd", "secret", "token", "key", "credential", "auth", "cookie",
};

// The TOML config with every secret masked, re-emitted from the parsed
// document (comments and layout are not kept). Every other string is passed
// through RedactTextSecrets. Text that does not parse keeps only its table
// headers and key names, every value masked. The first line is a comment that
// says which of the two happened.
std::string RedactConfigSecrets(std::string_view toml_text);

// `text` with credentials masked: URL user-info, query strings and fragments,
// the values of secret-named keys (above) and bearer tokens. Masking twice
// changes nothing.
std::string RedactTextSecrets(std::string_view text);

}  // namespace gpudoctor
