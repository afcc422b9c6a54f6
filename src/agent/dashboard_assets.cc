#include "agent/dashboard_assets.h"

namespace gpudoctor {

const DashboardAsset* FindDashboardAsset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const DashboardAsset& asset : DashboardAssets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

}  // namespace gpudoctor
