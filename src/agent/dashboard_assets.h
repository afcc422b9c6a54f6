// The web dashboard's files, compiled into the binary from web/dist at build
// time, so the agent serves the page with nothing to install and nothing
// fetched from the network.
//
//   const DashboardAsset* page = FindDashboardAsset("/");  // index.html
//   if (page) Reply(page->content_type, page->body);
#pragma once

#include <span>
#include <string_view>

namespace gpudoctor {

struct DashboardAsset {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view body;
};

std::span<const DashboardAsset> DashboardAssets();

// "/" finds "/index.html". Returns null for unknown paths.
const DashboardAsset* FindDashboardAsset(std::string_view path);

}  // namespace gpudoctor
