//! The error texts the browser shows, in the two languages of the page.
//!
//! msprobe's plugin crashed when `lang` was anything but "zh" or "en"; here any other value
//! falls back to English.

/// A failure the page is told about, by key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    MetaData,
    RankStepNull,
    DbInit,
    Type,
    LoadConfig,
    LoadNode,
    LoadMatchedRelations,
    ExpandNode,
    GetNodeInfo,
    GraphType,
    SearchType,
    SearchNode,
    TaskType,
    SelectedNodeCantMatched,
    MatchNode,
    LoadConfigFile,
    MatchNodeLinksNull,
    UpdateDatabase,
    SaveMatchRelationship,
    UpdateColor,
    NoUpdateNodesFound,
    UpdateNodeAccuracy,
    ConvertJob,
    Diagnose,
    /// A structure-only compare asked for a diagnosis.
    StructureOnly,
}

/// The page's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Zh,
    En,
}

impl Lang {
    /// "zh" (or any "zh-…") is Chinese; everything else English.
    pub fn parse(lang: &str) -> Lang {
        if lang.trim().to_ascii_lowercase().starts_with("zh") {
            Lang::Zh
        } else {
            Lang::En
        }
    }
}

impl Msg {
    /// The text in `lang`.
    pub fn text(self, lang: Lang) -> &'static str {
        let (en, zh) = match self {
            Msg::MetaData => (
                "The query parameter “metaData” and its sub-items must exist and must be a dictionary.",
                "查询参数“metaData”及其子项必须存在且为字典。",
            ),
            Msg::RankStepNull => ("rank, step and microStep must not be empty.", "rank、step 和 microStep 不能为空。"),
            Msg::DbInit => ("The database file could not be opened.", "数据库文件无法打开。"),
            Msg::Type => ("Unsupported file type; only \"db\" is supported.", "不支持的文件类型，仅支持 \"db\"。"),
            Msg::LoadConfig => ("Failed to load the graph configuration.", "加载图配置失败。"),
            Msg::LoadNode => ("Failed to load the node list.", "加载节点列表失败。"),
            Msg::LoadMatchedRelations => ("Failed to load the matched relations.", "加载匹配关系失败。"),
            Msg::ExpandNode => ("node expand or collapse error", "节点展开或收起失败"),
            Msg::GetNodeInfo => ("Failed to get the node information.", "获取节点信息失败。"),
            Msg::GraphType => (
                "graph type error, only support \"NPU\" or \"BENCH\"",
                "图类型错误，仅支持 \"NPU\" 或 \"BENCH\"",
            ),
            Msg::SearchType => ("search type error", "搜索类型错误"),
            Msg::SearchNode => ("Failed to search nodes.", "搜索节点失败。"),
            Msg::TaskType => ("task type not support", "不支持的任务类型"),
            Msg::SelectedNodeCantMatched => (
                "The selected node cannot be matched.",
                "所选节点无法匹配。",
            ),
            Msg::MatchNode => ("match node failed", "节点匹配失败"),
            Msg::LoadConfigFile => ("Failed to load the matching configuration file.", "加载匹配配置文件失败。"),
            Msg::MatchNodeLinksNull => (
                "The matching configuration file holds no node pairs.",
                "匹配配置文件中没有节点对。",
            ),
            Msg::UpdateDatabase => ("Failed to update the database.", "更新数据库失败。"),
            Msg::SaveMatchRelationship => ("Failed to save the matched relations.", "保存匹配关系失败。"),
            Msg::UpdateColor => ("Failed to update the colors.", "更新颜色失败。"),
            Msg::NoUpdateNodesFound => ("No nodes to update were found.", "未找到需要更新的节点。"),
            Msg::UpdateNodeAccuracy => ("Failed to update the node precision.", "更新节点精度失败。"),
            Msg::ConvertJob => (
                "There is no running conversion with that id.",
                "没有该 id 的进行中的转换任务。",
            ),
            Msg::Diagnose => ("Diagnosis failed:", "诊断失败："),
            Msg::StructureOnly => (
                "This is a structure-only comparison: its dumps hold the model's structure but no \
                 data, so there is nothing to diagnose.",
                "这是仅结构比对：dump 只包含模型结构，不含数据，因此没有可诊断的内容。",
            ),
        };
        match lang {
            Lang::En => en,
            Lang::Zh => zh,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_languages_fall_back_to_english() {
        assert_eq!(Lang::parse("zh-CN"), Lang::Zh);
        assert_eq!(Lang::parse("fr"), Lang::En);
        assert_eq!(Lang::parse(""), Lang::En);
        assert_eq!(Msg::SearchType.text(Lang::Zh), "搜索类型错误");
    }
}
