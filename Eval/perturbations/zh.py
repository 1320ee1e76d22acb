"""Chinese perturbations: fullwidth (punctuation width), traditional, homophone. Our own tables:
about 270 simplified characters whose traditional form (Taiwan's: 為, 眾) does not depend on the
word (后, 发, 里, 签 have two: left out), and common characters sharing a pinyin syllable.
"""
from __future__ import annotations

import random
import re

from Eval.perturbations import apply, perturbation, swap_chars  # noqa: F401  (apply: the cards)

# Half-width punctuation and its full-width form; "." becomes 。, what Chinese text uses.
_HALF, _FULL = ",.?!:;()", "，。？！：；（）"
TO_FULL, TO_HALF = dict(zip(_HALF, _FULL)), dict(zip(_FULL, _HALF))
# Between two digits the half-width mark is part of a number (3.14, 1,000, 10:30): kept.
_WIDTH_RE = re.compile(r"(?<![0-9])[,.:]|[,.:](?![0-9])|[?!;()" + _FULL + "]")


@perturbation("fullwidth", languages=("zh",))
def fullwidth(text: str, rng: random.Random) -> str:
    """Punctuation width flipped: , . ? ! : ; ( ) become ，。？！：；（） and back (a mark
    between two digits, as in 3.14 or 10:30, is kept).

    >>> apply("fullwidth", "价格是3.5元,对吗?答：对。", "doc")
    '价格是3.5元，对吗？答:对.'
    """
    return _WIDTH_RE.sub(lambda m: TO_FULL.get(m.group(0)) or TO_HALF[m.group(0)], text)


# each simplified character followed by its traditional form
_PAIRS = (
    "这這个個们們来來时時会會为為说說对對过過还還国國学學动動实實"
    "现現么麼问問题題间間开開关關门門长長东東车車书書见見话話语語"
    "读讀写寫听聽买買卖賣钱錢电電脑腦机機气氣经經济濟两兩从從进進"
    "边邊样樣种種应應该該当當无無爱愛头頭点點让讓认認识識记記论論"
    "设設计計区區华華归歸飞飛马馬鸟鳥鱼魚龙龍风風业業产產网網络絡"
    "线線结結给給级級红紅绿綠蓝藍黄黃图圖体體医醫药藥报報纸紙乐樂"
    "欢歡觉覺视視亲親观觀规規员員园園圆圓团團张張万萬与與专專严嚴"
    "丽麗乡鄉亚亞众眾优優伤傷传傳价價办辦务務劳勞势勢单單卫衛压壓"
    "县縣变變号號叶葉吗嗎启啟场場块塊坚堅处處备備夺奪奋奮妈媽孙孫"
    "宝寶宽寬导導层層岁歲师師带帶帮幫广廣庆慶库庫异異弃棄弹彈录錄"
    "态態总總恶惡战戰护護拥擁择擇换換据據数數断斷旧舊显顯晓曉术術"
    "杂雜权權条條极極构構树樹桥橋检檢楼樓汉漢汤湯没沒沟溝灯燈热熱"
    "爷爺独獨猫貓环環画畫疗療离離积積称稱穷窮竞競笔筆简簡类類纪紀"
    "约約继繼续續维維罗羅职職联聯肠腸胜勝脸臉节節苏蘇荣榮虽雖补補"
    "装裝讨討训訓议議许許证證评評诉訴词詞译譯试試诗詩请請谁誰调調"
    "谈談谢謝贝貝负負财財责責质質购購贵貴费費资資赛賽赶趕跃躍轻輕"
    "较較辆輛运運远遠连連选選递遞邮郵铁鐵银銀错錯阳陽阴陰际際陆陸"
    "险險随隨难難雾霧顺順预預领領饭飯馆館验驗鲜鮮鸡雞齐齊"
)
TRADITIONAL = str.maketrans(_PAIRS[0::2], _PAIRS[1::2])


@perturbation("traditional", languages=("zh",))
def traditional(text: str, rng: random.Random) -> str:
    """Simplified characters of our table written in their traditional form (others kept).

    >>> apply("traditional", "这个问题的答案在书里吗？", "doc")
    '這個問題的答案在書里嗎？'
    """
    return text.translate(TRADITIONAL)


# Groups of common characters read with the same syllable (tones ignored); none is in two groups.
_HOMOPHONES = (
    "的地得 在再 做作坐 他她它 是事市式 以已意 像向象 进近今 到道倒 "
    "和合河 其期奇 力立利 工公功 知之支 机鸡几 为位未 新心信 上尚 "
    "于与语 手首受 明名 家加 天田 候后 请情清 过国果"
)
HOMOPHONES = {ch: group.replace(ch, "") for group in _HOMOPHONES.split() for ch in group}


@perturbation("homophone", languages=("zh",), default_args=(0.1,), bounds=((0.0, 1.0),))
def homophone(text: str, rng: random.Random, rate: float) -> str:
    """Each character of our homophone table, with probability `rate`, replaced by another read
    the same way (的 -> 地, 在 -> 再, ...): the typo a pinyin input method makes.

    >>> apply("homophone", "他在家里做作业，明天再去公园", "doc")
    '他在加里坐作业，明天再去公园'
    """
    return swap_chars(text, rng, rate, HOMOPHONES)
