// The link test through the fake CUDA driver, whose copies run at the rates
// of the scenario and may corrupt what they carry.
#include "diag/pcie.h"

#include <gtest/gtest.h>

#include "diag/fake_cuda_test_support.h"

namespace gpudoctor {
namespace {

class Pcie : public testing::FakeCudaTest {
 protected:
  Result<PcieResult> Run(std::vector<int> devices) {
    return RunPcie(*driver_, {.devices = std::move(devices), .transfer_bytes = 2 << 20, .repeats = 2}, nullptr, nullptr);
  }
};

TEST_F(Pcie, EachLinkIsTimedBothWaysAndEveryPairIsCopied) {
  Load("[cuda]\nmemory_mib = 8\npcie_gbps = 4\np2p_gbps = 8\n", 3);
  auto result = Run({0, 1, 2});
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_EQ(result->links.size(), 3u);
  for (const PcieLinkResult& link : result->links) {
    EXPECT_TRUE(link.data_intact);
    EXPECT_TRUE(link.error.empty()) << link.error;
    // The fake's copies cannot beat the scenario's rate; sleeping may only make them slower.
    EXPECT_GT(link.host_to_device_gb_per_s, 0);
    EXPECT_LE(link.host_to_device_gb_per_s, 4.05);
    EXPECT_LE(link.device_to_host_gb_per_s, 4.05);
  }
  ASSERT_EQ(result->peers.size(), 6u);
  for (const PciePeerResult& peer : result->peers) {
    EXPECT_NE(peer.from, peer.to);
    EXPECT_TRUE(peer.peer_access);
    EXPECT_TRUE(peer.data_intact);
    EXPECT_LE(peer.gb_per_s, 8.1);
  }
}

TEST_F(Pcie, ALinkThatChangesTheDataIsCaught) {
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 1\ncorrupt_copies = true\n", 2);
  auto result = Run({0, 1});
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(result->links[0].data_intact);
  EXPECT_FALSE(result->links[1].data_intact);
  ASSERT_EQ(result->peers.size(), 2u);
  // Both pairs involve the bad GPU's link: 1 -> 0 sends from it, 0 -> 1 is read back through it.
  EXPECT_FALSE(result->peers[0].data_intact);
  EXPECT_FALSE(result->peers[1].data_intact);
}

TEST_F(Pcie, PairsWithoutPeerAccessAreStillCopiedThroughTheHost) {
  Load("[cuda]\nmemory_mib = 8\npeer_access = false\n", 2);
  auto result = Run({0, 1});
  ASSERT_TRUE(result) << result.error().message;
  for (const PciePeerResult& peer : result->peers) {
    EXPECT_FALSE(peer.peer_access);
    EXPECT_TRUE(peer.data_intact);
  }
}

TEST_F(Pcie, OneGpuHasNoPeers) {
  Load("[cuda]\nmemory_mib = 8\n");
  auto result = Run({0});
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->links.size(), 1u);
  EXPECT_TRUE(result->peers.empty());
}

TEST_F(Pcie, AGpuThatDoesNotExistIsAClearError) {
  Load("[cuda]\nmemory_mib = 8\n");
  auto result = Run({0, 4});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("no CUDA device 4"), std::string::npos) << result.error().message;
}

}  // namespace
}  // namespace gpudoctor
