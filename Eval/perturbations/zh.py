"""Chinese perturbations: fullwidth (punctuation width), traditional, homophone.

The tables are small ones of our own: about 270 simplified characters whose traditional form does
not depend on the word, in Taiwan's forms (為, 眾; 后, 发, 里, 签, with two traditional forms, are
left out on purpose), and groups of common characters sharing a pinyin syllable (tones ignored),
the usual input-method typos.
"""
from __future__ import annotations

import random
import re

from Eval.perturbations import apply, perturbation  # noqa: F401  (apply: used by the cards' examples)

# Half-width punctuation and its full-width form; "." becomes 。, what Chinese text uses.
_HALF, _FULL = ",.?!:;()", "，。？！：；（）"
TO_FULL, TO_HALF = dict(zip(_HALF, _FULL)), dict(zip(_FULL, _HALF))
# Between two digits the half-width mark is part of a number (3.14, 1,000, 10:30) and is left as it is.
_WIDTH_RE = re.compile(r"(?<![0-9])[,.:]|[,.:](?![0-9])|[?!;()" + _FULL + "]")


@perturbation("fullwidth", languages=("zh",))
def fullwidth(text: str, rng: random.Random) -> str:
    """Punctuation width flipped: half-width , . ? ! : ; ( ) become ，。？！：；（） and those become half-width
    (deterministic; a mark between two digits, as in 3.14 or 10:30, is kept).

    >>> apply("fullwidth", "价格是3.5元,对吗?答：对。", "doc")
    '价格是3.5元，对吗？答:对.'
    """
    return _WIDTH_RE.sub(lambda m: TO_FULL.get(m.group(0)) or TO_HALF[m.group(0)], text)


_SIMPLIFIED = ("这个们来时会为说对过还国学动实现么问题间开关门长东车书见话语读写听买卖钱电脑机气经济两从进边样"
               "种应该当无爱头点让认识记论设计区华归飞马鸟鱼龙风业产网络线结给级红绿蓝黄图体医药报纸乐欢觉视亲"
               "观规员园圆团张万与专严丽乡亚众优伤传价办务劳势单卫压县变号叶吗启场块坚处备夺奋妈孙宝宽导层岁"
               "师带帮广庆库异弃弹录态总恶战护拥择换据数断旧显晓术杂权条极构树桥检楼汉汤没沟灯热爷独猫环画疗"
               "离积称穷竞笔简类纪约继续维罗职联肠胜脸节苏荣虽补装讨训议许证评诉词译试诗请谁调谈谢贝负财责"
               "质购贵费资赛赶跃轻较辆运远连选递邮铁银错阳阴际陆险随难雾顺预领饭馆验鲜鸡齐")
_TRADITIONAL = ("這個們來時會為說對過還國學動實現麼問題間開關門長東車書見話語讀寫聽買賣錢電腦機氣經濟兩從進邊樣"
                "種應該當無愛頭點讓認識記論設計區華歸飛馬鳥魚龍風業產網絡線結給級紅綠藍黃圖體醫藥報紙樂歡覺視親"
                "觀規員園圓團張萬與專嚴麗鄉亞眾優傷傳價辦務勞勢單衛壓縣變號葉嗎啟場塊堅處備奪奮媽孫寶寬導層歲"
                "師帶幫廣慶庫異棄彈錄態總惡戰護擁擇換據數斷舊顯曉術雜權條極構樹橋檢樓漢湯沒溝燈熱爺獨貓環畫療"
                "離積稱窮競筆簡類紀約繼續維羅職聯腸勝臉節蘇榮雖補裝討訓議許證評訴詞譯試詩請誰調談謝貝負財責"
                "質購貴費資賽趕躍輕較輛運遠連選遞郵鐵銀錯陽陰際陸險隨難霧順預領飯館驗鮮雞齊")
TRADITIONAL = str.maketrans(_SIMPLIFIED, _TRADITIONAL)


@perturbation("traditional", languages=("zh",))
def traditional(text: str, rng: random.Random) -> str:
    """Simplified characters of our table written in their traditional form (others kept).

    >>> apply("traditional", "这个问题的答案在书里吗？", "doc")
    '這個問題的答案在書里嗎？'
    """
    return text.translate(TRADITIONAL)


# Groups of common characters read with the same syllable (tones ignored); no character is in two groups.
_HOMOPHONES = ("的地得 在再 做作坐 他她它 是事市式 以已意 像向象 进近今 到道倒 和合河 其期奇 力立利 工公功 "
               "知之支 机鸡几 为位未 新心信 上尚 于与语 手首受 明名 家加 天田 候后 请情清 过国果")
HOMOPHONES = {ch: group.replace(ch, "") for group in _HOMOPHONES.split() for ch in group}


@perturbation("homophone", languages=("zh",), default_args=(0.1,), bounds=((0.0, 1.0),))
def homophone(text: str, rng: random.Random, rate: float) -> str:
    """Each character of our homophone table, with probability `rate`, replaced by another character read
    the same way (的 -> 地, 在 -> 再, ...): the typo a pinyin input method makes.

    >>> apply("homophone", "他在家里做作业，明天再去公园", "doc")
    '他在加里坐作业，明天再去公园'
    """
    out = []
    for ch in text:
        others = HOMOPHONES.get(ch)
        if others and rng.random() < rate:
            ch = rng.choice(others)
        out.append(ch)
    return "".join(out)
