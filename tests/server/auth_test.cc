// The token file and the roles (server/auth.h, docs/SECURITY.md).
#include "server/auth.h"

#include <string>

#include "gtest/gtest.h"

namespace gangsched::server {
namespace {

std::string Entry(const std::string& token, const std::string& subject,
                  const std::string& role) {
  return "- {sha256: " + Sha256Hex(token) + ", subject: " + subject +
         ", role: " + role + "}\n";
}

TEST(TokenTableTest, FindsTokensByDigestAndCertificatesByCommonName) {
  auto table = TokenTable::Parse(Entry("s3cret", "alice", "admin") +
                                 "- {cn: kuberay-shim, role: shim}\n");
  ASSERT_TRUE(table.ok()) << table.status();
  const Principal* alice = table->FindToken("s3cret");
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->subject, "alice");
  EXPECT_EQ(alice->role, Role::kAdmin);
  EXPECT_EQ(table->FindToken("s3cret "), nullptr);
  EXPECT_EQ(table->FindToken(Sha256Hex("s3cret")), nullptr);  // not the digest
  const Principal* shim = table->FindCommonName("kuberay-shim");
  ASSERT_NE(shim, nullptr);
  EXPECT_EQ(shim->subject, "kuberay-shim");
  EXPECT_EQ(shim->role, Role::kShim);
  EXPECT_EQ(table->FindCommonName("Kuberay-shim"), nullptr);
}

TEST(TokenTableTest, RefusesWhatCouldBeReadTwoWays) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  const std::string digest = Sha256Hex("t");
  for (const Case& c : std::vector<Case>{
           {"- {sha256: " + digest + ", subject: a, role: admin, role: viewer}",
            "[0].role: given twice"},
           {"- {sha256: abc, subject: a, role: admin}", "[0].sha256"},
           {"- {sha256: " + digest + ", subject: a, role: root}",
            "[0].role: \"root\" is not a role"},
           {"- {sha256: " + digest + ", role: admin}", "[0].subject"},
           {"- {sha256: " + digest + ", cn: x, role: admin}", "exactly one"},
           {"- {sha256: " + digest + ", subject: a, role: admin, extra: 1}",
            "[0].extra: unknown field"},
           {Entry("t", "a", "admin") + Entry("t", "b", "viewer"),
            "[1].sha256: listed twice"},
           {"{sha256: x}", "expected a list"},
       }) {
    auto table = TokenTable::Parse(c.yaml);
    ASSERT_FALSE(table.ok()) << c.yaml;
    EXPECT_NE(table.status().message().find(c.error), std::string::npos)
        << table.status() << " / wanted " << c.error;
  }
}

TEST(TokenTableTest, EachRoleAllowsItsAccesses) {
  EXPECT_TRUE(Allows(Role::kViewer, Access::kRead));
  EXPECT_FALSE(Allows(Role::kViewer, Access::kSchedule));
  EXPECT_FALSE(Allows(Role::kViewer, Access::kAdmin));
  EXPECT_TRUE(Allows(Role::kShim, Access::kSchedule));
  EXPECT_FALSE(Allows(Role::kShim, Access::kAdmin));
  EXPECT_TRUE(Allows(Role::kAdmin, Access::kAdmin));
}

TEST(TokenTableTest, LoadRefusesWhatIsNotAFile) {
  auto dir = TokenTable::Load("/");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("not a readable file"),
            std::string::npos);
  EXPECT_FALSE(TokenTable::Load("/nonexistent/tokens.yaml").ok());
}

}  // namespace
}  // namespace gangsched::server
