#include "agent/alert_sinks.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "agent/testing/test_start.h"
#include "net/testing/scripted_server.h"

namespace gpudoctor {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

using agent_testing::kStart;

Alert SampleAlert(FindingTransition::Kind kind = FindingTransition::Kind::kOpened,
                  Severity severity = Severity::kCritical) {
  StoredFinding incident;
  incident.incident_id = 3;
  incident.key = "row_remap_pending@GPU-5";
  incident.finding = {
      .id = "row_remap_pending",
      .severity = severity,
      .gpu = GpuRef{.index = 5, .uuid = "GPU-5", .pci_bus_id = "0000:ab:00.0", .serial = "1652"},
      .summary = "GPU 5 has a row remap pending",
      .evidence = {"remapped_rows_pending = true"},
      .cause = "An HBM cell failed;\nthe row was remapped.",
      .actions = {"Reset the GPU", "Open an RMA if it recurs"}};
  incident.opened_at = kStart + seconds(30);
  incident.last_seen = kStart + seconds(30);
  if (kind == FindingTransition::Kind::kResolved) incident.resolved_at = kStart + seconds(90);
  return {{kind, incident}, "node-1", 0};
}

// A local webhook receiver on a free port. Answers with the statuses in
// `script`, then 200.
class Receiver {
 public:
  explicit Receiver(std::vector<int> script = {}) : script_(std::move(script)) {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      requests_.push_back(req);
      const size_t n = requests_.size();
      res.status = n <= script_.size() ? script_[n - 1] : 200;
      if (delay_ > milliseconds(0)) std::this_thread::sleep_for(delay_);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return fmt::format("http://127.0.0.1:{}/hook", port_); }
  std::vector<httplib::Request> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  void SetDelay(milliseconds delay) { delay_ = delay; }

 private:
  httplib::Server server_;
  std::vector<int> script_;
  std::mutex mutex_;
  std::vector<httplib::Request> requests_;
  milliseconds delay_{0};
  int port_ = 0;
  std::thread thread_;
};

struct RecordedSleeps {
  std::vector<Duration> sleeps;
  std::function<bool(Duration)> Sleeper() {
    return [this](Duration d) {
      sleeps.push_back(d);
      return true;
    };
  }
};

TEST(WebhookSink, PostsTheAlertAsJson) {
  Receiver receiver;
  Result<std::unique_ptr<AlertSink>> sink =
      MakeWebhookSink({.url = receiver.Url(), .headers = {{"Authorization", "Bearer abc"}}});
  ASSERT_TRUE(sink.ok()) << sink.error().message;
  EXPECT_EQ((*sink)->kind(), "webhook");
  ASSERT_TRUE((*sink)->Deliver(SampleAlert()).ok());

  std::vector<httplib::Request> got = receiver.requests();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(got[0].get_header_value("Authorization"), "Bearer abc");
  EXPECT_EQ(got[0].get_header_value("User-Agent"), "gpudoctor");
  json body = json::parse(got[0].body);
  EXPECT_EQ(body["event"], "opened");
  EXPECT_EQ(body["hostname"], "node-1");
  EXPECT_EQ(body["finding"]["id"], "row_remap_pending");
  EXPECT_EQ(body["finding"]["severity"], "critical");
  EXPECT_EQ(body["finding"]["gpu"]["index"], 5);
  EXPECT_EQ(body["finding"]["actions"].size(), 2u);
}

TEST(WebhookSink, RetriesServerErrorsWithExponentialBackoff) {
  Receiver receiver({503, 500, 429});
  RecordedSleeps sleeps;
  Result<std::unique_ptr<AlertSink>> sink = MakeWebhookSink(
      {.url = receiver.Url(), .max_attempts = 5, .initial_backoff = seconds(1), .sleep = sleeps.Sleeper()});
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Deliver(SampleAlert()).ok());
  EXPECT_EQ(receiver.requests().size(), 4u);
  EXPECT_EQ(sleeps.sleeps, (std::vector<Duration>{seconds(1), seconds(2), seconds(4)}));
}

TEST(WebhookSink, GivesUpAfterMaxAttemptsWithCappedBackoff) {
  Receiver receiver({500, 500, 500, 500, 500, 500});
  RecordedSleeps sleeps;
  Result<std::unique_ptr<AlertSink>> sink = MakeWebhookSink({.url = receiver.Url(),
                                                             .max_attempts = 5,
                                                             .initial_backoff = seconds(10),
                                                             .max_backoff = seconds(25),
                                                             .sleep = sleeps.Sleeper()});
  Status status = (*sink)->Deliver(SampleAlert());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("gave up after 5 attempts"), std::string::npos);
  EXPECT_NE(status.error().message.find("500"), std::string::npos);
  EXPECT_EQ(receiver.requests().size(), 5u);
  EXPECT_EQ(sleeps.sleeps, (std::vector<Duration>{seconds(10), seconds(20), seconds(25), seconds(25)}));
}

TEST(WebhookSink, ClientErrorsAreNotRetried) {
  Receiver receiver({400});
  RecordedSleeps sleeps;
  Result<std::unique_ptr<AlertSink>> sink =
      MakeWebhookSink({.url = receiver.Url(), .sleep = sleeps.Sleeper()});
  Status status = (*sink)->Deliver(SampleAlert());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("answered 400"), std::string::npos);
  EXPECT_EQ(receiver.requests().size(), 1u);
  EXPECT_TRUE(sleeps.sleeps.empty());
}

TEST(WebhookSink, UnreachableReceiverIsRetriedThenReported) {
  // A port that was free a moment ago: bound, then closed, so connecting is refused.
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int closed_port = ntohs(address.sin_port);
  ::close(probe);
  RecordedSleeps sleeps;
  Result<std::unique_ptr<AlertSink>> sink =
      MakeWebhookSink({.url = fmt::format("http://127.0.0.1:{}/hook", closed_port),
                       .max_attempts = 3,
                       .sleep = sleeps.Sleeper()});
  Status status = (*sink)->Deliver(SampleAlert());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(sleeps.sleeps.size(), 2u);
}

TEST(WebhookSink, SlowReceiverTimesOut) {
  Receiver receiver;
  receiver.SetDelay(milliseconds(1500));
  Result<std::unique_ptr<AlertSink>> sink =
      MakeWebhookSink({.url = receiver.Url(), .timeout = milliseconds(200), .max_attempts = 1});
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE((*sink)->Deliver(SampleAlert()).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(1200));
}

// A receiver that sends a byte a second never times out a read: each attempt
// ends at the webhook's timeout, is retried by the policy, and the delivery
// fails with the reason.
TEST(WebhookSink, ADrippingReceiverIsAFailureRetriedByItsPolicy) {
  std::atomic<int> attempts{0};
  testing::ScriptedServer receiver([&](int fd) {
    ++attempts;
    testing::ScriptedServer::ReadHead(fd);
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    for (char c : answer) {
      if (!testing::ScriptedServer::Send(fd, std::string_view(&c, 1))) return;
      std::this_thread::sleep_for(milliseconds(200));
    }
  });
  RecordedSleeps sleeps;
  Result<std::unique_ptr<AlertSink>> sink = MakeWebhookSink({.url = receiver.origin() + "/hook",
                                                             .timeout = milliseconds(300),
                                                             .max_attempts = 3,
                                                             .sleep = sleeps.Sleeper()});
  ASSERT_TRUE(sink.ok());
  const auto started = std::chrono::steady_clock::now();
  Status status = (*sink)->Deliver(SampleAlert());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("gave up after 3 attempts"), std::string::npos) << status.error().message;
  EXPECT_NE(status.error().message.find("no complete answer within 300ms"), std::string::npos)
      << status.error().message;
  EXPECT_EQ(attempts.load(), 3);
  EXPECT_EQ(sleeps.sleeps.size(), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
}

// Stopping the agent cuts an attempt under way short rather than wait for it.
TEST(WebhookSink, InterruptEndsAnAttemptUnderWay) {
  testing::ScriptedServer receiver([&](int fd) {
    testing::ScriptedServer::ReadHead(fd);
    char c;
    while (!receiver.stopping() && recv(fd, &c, 1, MSG_DONTWAIT) != 0) std::this_thread::sleep_for(milliseconds(10));
  });
  Result<std::unique_ptr<AlertSink>> sink =
      MakeWebhookSink({.url = receiver.origin() + "/hook", .timeout = seconds(60), .max_attempts = 4});
  ASSERT_TRUE(sink.ok());
  AlertSink* webhook = sink->get();
  std::thread interrupter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    webhook->Interrupt();
  });
  const auto started = std::chrono::steady_clock::now();
  Status status = webhook->Deliver(SampleAlert());
  interrupter.join();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("interrupted"), std::string::npos) << status.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
}

TEST(WebhookSink, InterruptEndsTheBackoffWait) {
  Receiver receiver({503, 503, 503});
  Result<std::unique_ptr<AlertSink>> sink =
      MakeWebhookSink({.url = receiver.Url(), .max_attempts = 4, .initial_backoff = seconds(60)});
  AlertSink* webhook = sink->get();
  std::thread interrupter([&] {
    while (receiver.requests().empty()) std::this_thread::sleep_for(milliseconds(1));
    webhook->Interrupt();
  });
  const auto started = std::chrono::steady_clock::now();
  Status status = webhook->Deliver(SampleAlert());
  interrupter.join();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("interrupted"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(10));
}

TEST(WebhookSink, RejectsBadUrls) {
  for (const char* url :
       {"", "alerts.example/hook", "ftp://alerts/hook", "http:///hook", "http://user:pw@alerts/hook"}) {
    EXPECT_FALSE(MakeWebhookSink({.url = url}).ok()) << url;
  }
  EXPECT_TRUE(MakeWebhookSink({.url = "https://alerts.example:8443/gpu?team=ml"}).ok());
  EXPECT_TRUE(MakeWebhookSink({.url = "http://alerts.example"}).ok());
}

TEST(WebhookSink, NeverNamesCredentialsInMessages) {
  auto refused = MakeWebhookSink({.url = "http://oncall:hunter2@alerts.example/hook?api_key=s3cret"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.find("hunter2"), std::string::npos) << refused.error().message;
  EXPECT_EQ(refused.error().message.find("s3cret"), std::string::npos) << refused.error().message;
  auto sink = MakeWebhookSink({.url = "https://alerts.example/hook?api_key=s3cret"});
  ASSERT_TRUE(sink.ok());
  EXPECT_EQ((*sink)->Describe().find("s3cret"), std::string::npos) << (*sink)->Describe();
  EXPECT_NE((*sink)->Describe().find("alerts.example"), std::string::npos) << (*sink)->Describe();
}

TEST(SyslogSink, PriorityFollowsSeverityAndTransition) {
  std::vector<std::pair<int, std::string>> lines;
  auto make = [&](std::string facility) {
    return MakeSyslogSink(
        {.facility = std::move(facility), .write = [&](int priority, std::string_view message) {
           lines.emplace_back(priority, std::string(message));
         }});
  };
  Result<std::unique_ptr<AlertSink>> sink = make("local3");
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Deliver(SampleAlert(FindingTransition::Kind::kOpened, Severity::kCritical)).ok());
  ASSERT_TRUE((*sink)->Deliver(SampleAlert(FindingTransition::Kind::kOpened, Severity::kWarning)).ok());
  ASSERT_TRUE((*sink)->Deliver(SampleAlert(FindingTransition::Kind::kResolved, Severity::kCritical)).ok());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].first, LOG_LOCAL3 | LOG_CRIT);
  EXPECT_EQ(lines[1].first, LOG_LOCAL3 | LOG_WARNING);
  EXPECT_EQ(lines[2].first, LOG_LOCAL3 | LOG_NOTICE);
  EXPECT_EQ(lines[0].second,
            "finding opened critical row_remap_pending on GPU 5 (0000:ab:00.0): GPU 5 has a row remap pending"
            " | cause: An HBM cell failed; the row was remapped. | action: Reset the GPU");
  EXPECT_EQ(lines[2].second.find("cause"), std::string::npos);
  EXPECT_FALSE(make("kernel").ok());
}

TEST(SyslogSink, RealSyslogDoesNotFail) {
  Result<std::unique_ptr<AlertSink>> sink = MakeSyslogSink({});
  ASSERT_TRUE(sink.ok());
  EXPECT_TRUE((*sink)->Deliver(SampleAlert()).ok());  // with or without a syslog daemon
}

class ExecSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("exec_sink_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Script(const std::string& name, const std::string& body) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path.string();
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::filesystem::path dir_;
};

TEST_F(ExecSinkTest, PassesTheAlertAsEnvironmentAndStdin) {
  const std::string out = (dir_ / "out").string();
  const std::string hook =
      Script("hook", "env > " + out + ".env\ncat > " + out + ".json\necho \"$1 $2\" > " + out + ".args\n");
  Result<std::unique_ptr<AlertSink>> sink = MakeExecSink({.argv = {hook, "--team", "gpu ops"}});
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Deliver(SampleAlert()).ok());

  const std::string env = Read("out.env");
  for (const char* expected :
       {"GPUDOCTOR_EVENT=opened", "GPUDOCTOR_FINDING_ID=row_remap_pending",
        "GPUDOCTOR_FINDING_KEY=row_remap_pending@GPU-5", "GPUDOCTOR_SEVERITY=critical",
        "GPUDOCTOR_GPU_INDEX=5", "GPUDOCTOR_GPU_UUID=GPU-5", "GPUDOCTOR_GPU_PCI_BUS_ID=0000:ab:00.0",
        "GPUDOCTOR_HOSTNAME=node-1", "GPUDOCTOR_SUMMARY=GPU 5 has a row remap pending",
        "GPUDOCTOR_SUPPRESSED=0", "GPUDOCTOR_TIME=2024-05-01T12:00:30.000Z", "PATH=/usr/local/sbin"}) {
    EXPECT_NE(env.find(expected), std::string::npos) << expected << "\n" << env;
  }
  EXPECT_EQ(env.find("HOME="), std::string::npos);  // nothing inherited
  EXPECT_EQ(env.find("GPUDOCTOR_FINDING_SUBJECT="), std::string::npos);  // only for findings with a subject
  json body = json::parse(Read("out.json"));
  EXPECT_EQ(body["finding"]["id"], "row_remap_pending");
  EXPECT_EQ(Read("out.args"), "--team gpu ops\n");  // argv, no shell splitting
}

TEST_F(ExecSinkTest, NonZeroExitIsAFailureWithItsOutput) {
  const std::string hook = Script("hook", "echo 'pager unreachable' >&2\nexit 3\n");
  Result<std::unique_ptr<AlertSink>> sink = MakeExecSink({.argv = {hook}});
  Status status = (*sink)->Deliver(SampleAlert());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("exit status 3"), std::string::npos);
  EXPECT_NE(status.error().message.find("pager unreachable"), std::string::npos);
}

TEST_F(ExecSinkTest, HangingHookIsKilledAtItsTimeout) {
  const std::string hook = Script("hook", "sleep 30\n");
  Result<std::unique_ptr<AlertSink>> sink = MakeExecSink({.argv = {hook}, .timeout = milliseconds(300)});
  const auto started = std::chrono::steady_clock::now();
  Status status = (*sink)->Deliver(SampleAlert());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("timed out"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
}

TEST_F(ExecSinkTest, RejectsRelativeAndMissingPrograms) {
  EXPECT_FALSE(MakeExecSink({.argv = {"page-oncall"}}).ok());
  EXPECT_FALSE(MakeExecSink({.argv = {}}).ok());
  EXPECT_FALSE(MakeExecSink({.argv = {"/bin/true"}, .timeout = Duration::zero()}).ok());
  Result<std::unique_ptr<AlertSink>> missing = MakeExecSink({.argv = {(dir_ / "missing").string()}});
  ASSERT_TRUE(missing.ok());
  Status status = (*missing)->Deliver(SampleAlert());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("No such file"), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
