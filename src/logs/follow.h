// Following logs as they grow: a file by name (surviving rotation and
// truncation, like `tail -F`), and this machine's live kernel log
// (/dev/kmsg, the journal through journalctl, or a /var/log file).
//
//   std::atomic<bool> stop{false};
//   FollowFile("/var/log/kern.log", options, {}, print_event, [&] { return stop.load(); });
//
// Open events are closed and reported once the input has been quiet for
// `quiet_flush`, so a new line is reported within poll_interval + quiet_flush.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/result.h"
#include "logs/log_reader.h"

namespace gpudoctor {

struct FollowOptions {
  std::chrono::milliseconds poll_interval{200};
  std::chrono::milliseconds quiet_flush{300};
  bool start_at_end = false;  // skip what the file holds when following starts
  // Called each time the file is opened and positioned (at start, after a
  // rotation); lines written after the first call are never skipped.
  std::function<void()> on_open;
};

using StopRequested = std::function<bool()>;

// Tails `path` until `should_stop` returns true. Waits for the file to exist;
// after a rotation (a new file under the name) reads the rest of the old file,
// then the new one from its start; after truncation starts again from the top.
// Fails when the name holds something the input rule (common/input_file.h)
// refuses: a FIFO, a device or a directory is never followed.
Status FollowFile(const std::string& path, ReadOptions options, const FollowOptions& follow,
                  const EventSink& sink, const StopRequested& should_stop);

enum class LiveLogKind { kKmsg, kJournal, kFile };

struct LiveLog {
  LiveLogKind kind = LiveLogKind::kKmsg;
  std::string path;         // "/dev/kmsg", "journalctl", "/var/log/kern.log"
  std::string description;  // for the person: "kernel ring buffer (/dev/kmsg)"
};

// Where this machine's kernel log can be read: /dev/kmsg, else the journal,
// else the first readable of /var/log/kern.log, messages, syslog. The
// reasons the earlier ones were passed over are added to `notes`.
Result<LiveLog> FindLiveLog(std::vector<std::string>* notes = nullptr);

// Reads the live log once (follow = false) or until `should_stop` (true).
// Kernel uptime stamps are dated with the boot time from /proc/stat.
Status ReadLiveLog(const LiveLog& log, ReadOptions options, bool follow, const FollowOptions& follow_options,
                   const EventSink& sink, const StopRequested& should_stop, ReadStats* stats = nullptr);

}  // namespace gpudoctor
